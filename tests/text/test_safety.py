import shutil
from collections import Counter

import numpy as np
import pytest

from forenset.seeds import rng_for
from forenset.text.models import FiveW1HPrompt, ScenarioExpansion
from forenset.text.safety_prompts import (
    PromptRecord,
    build_prompt,
    dedupe,
    find_placeholders,
    offline_prompts,
    prompt_5w1h_vars,
    record_from_llm,
    scenario_expansion_vars,
    scenarios_from_llm,
    synthetic_values,
    validate_5w1h,
    validate_prompt_record,
)
from forenset.text.taxonomy import (
    TAXONOMY_PATH,
    get_category,
    load_full_taxonomy,
    load_taxonomy,
    sample_scenarios,
    taxonomy_hash,
)
from forenset.text.templates import render

IDS = [f"P{i}" for i in range(1, 9)] + [f"I{i}" for i in range(1, 5)]


@pytest.fixture(scope="module")
def prompts():
    return offline_prompts(seed=1234)


def test_taxonomy_has_twelve_rich_categories():
    cats = load_taxonomy()
    assert [c.id for c in cats] == IDS
    assert {c.group for c in cats[:8]} == {"public"} and {c.group for c in cats[8:]} == {
        "individual"
    }
    for c in cats:
        assert c.evidentiary_function and c.risk_summary
        assert len(c.contents) >= 8 and len(c.media_forms) >= 3
        for slot in ("who", "where", "why", "how", "details"):
            assert len(getattr(c.slots, slot)) >= 5, (c.id, slot)
    assert get_category("I2").forbids_placeholders and get_category("I3").forbids_placeholders
    assert all(c.requires_time_cue for c in cats[:8])
    assert len(load_full_taxonomy().universal_rules) >= 6


def test_taxonomy_hash_tracks_the_file(tmp_path):
    copy = tmp_path / "taxonomy.yaml"
    shutil.copy(TAXONOMY_PATH, copy)
    assert taxonomy_hash(copy) == taxonomy_hash()
    copy.write_text(copy.read_text().replace("Natural Disasters", "Natural Hazards"))
    assert taxonomy_hash(copy) != taxonomy_hash()
    assert load_taxonomy(copy)[0].name == "Natural Hazards"


def test_sample_scenarios_distinct_compatible_deterministic():
    cat = get_category("I2")
    space = sum(c.fits(m) for c in cat.contents for m in cat.media_forms)
    assert 12 <= space < len(cat.contents) * len(cat.media_forms)  # media tags prune pairs
    a = sample_scenarios(cat, np.random.default_rng(3), space)
    b = sample_scenarios(cat, np.random.default_rng(3), space)
    assert a == b
    pairs = [(s.content, s.media_form) for s in a]
    assert len(set(pairs)) == space  # every compatible pair once before any repeats
    items = {c.text: c for c in cat.contents}
    assert all(items[s.content].fits(s.media_form) for s in a)
    assert all(s.risk_summary == cat.risk_summary and s.category == "I2" for s in a)
    # more than the space: still n, pairs repeat only after the space is exhausted
    many = sample_scenarios(get_category("P2"), np.random.default_rng(0), 40)
    assert len(many) == 40 and len({(s.content, s.media_form) for s in many[:32]}) == 32


def test_offline_prompts_cover_all_categories(prompts):
    counts = Counter(r.category for r in prompts)
    assert len(prompts) >= 120
    assert set(counts) == set(IDS) and min(counts.values()) >= 8
    assert len({r.prompt_id for r in prompts}) == len(prompts)
    for r in prompts:
        assert validate_prompt_record(r) == [], r.prompt
        assert r.scenario.category == r.category and r.media_form == r.scenario.media_form
        assert r.scenario.content in r.prompt
        assert r.constraints == get_category(r.category).all_constraints()


def test_offline_prompts_are_deterministic(prompts):
    again = offline_prompts(seed=1234)
    assert [r.model_dump() for r in again] == [r.model_dump() for r in prompts]
    other = offline_prompts(seed=99)
    assert {r.prompt for r in other} != {r.prompt for r in prompts}
    # per-category rngs: building a subset yields the same records for that subset
    sub = offline_prompts(seed=1234, categories=["I3"])
    assert [r.prompt for r in sub] == [r.prompt for r in prompts if r.category == "I3"]


def test_category_constraints(prompts):
    for r in prompts:
        if r.group == "public":
            assert "time element" in r.prompt
        if r.category in ("I2", "I3"):
            assert r.synthetic_values and find_placeholders(r.prompt) == []
            for v in r.synthetic_values.values():
                assert v in r.prompt


def test_row_is_flat_provenance(prompts):
    row = prompts[0].row()
    for k in (
        "prompt_id",
        "category",
        "scenario",
        "scenario_id",
        "prompt",
        "media_form",
        "who",
        "what",
        "when",
        "where",
        "why",
        "how",
        "content",
    ):
        assert row[k]
    assert isinstance(row["scenario"], str) and isinstance(row["fields"], str)


def test_validate_5w1h():
    ok = dict(
        who="two paramedics in yellow jackets",
        what="a bus in a ditch",
        when="Tuesday 4 March 2025, around 07:40",
        where="a rural road by a farm",
        why="black ice on a bend",
        how="photographed from the verge at eye level",
    )
    assert validate_5w1h(ok) == []
    missing = {k: v for k, v in ok.items() if k != "why"}
    assert validate_5w1h(missing) == ["why: missing"]
    assert any("vague" in f for f in validate_5w1h({**ok, "who": "someone nearby"}))
    assert any("no concrete time" in f for f in validate_5w1h({**ok, "when": "at some point"}))
    assert any("too short" in f for f in validate_5w1h({**ok, "where": "outside"}))
    assert any("placeholder" in f for f in validate_5w1h({**ok, "who": "User A and User B"}))


@pytest.mark.parametrize(
    "text",
    [
        "Paid to xx",
        "ID XXXX-4821",
        "amount 1234.00",
        "account 0000 5521",
        "From John Doe",
        "Dear [name],",
        "Total {amount}",
        "User A: hi",
        "Lorem ipsum dolor",
        "ref 98765",
        "time xx:xx",
    ],
)
def test_find_placeholders_flags(text):
    assert find_placeholders(text), text


@pytest.mark.parametrize(
    "text",
    [
        "£1,000.00 to Amara Okafor",
        "reference TRX7305918264",
        "+44 7992 838244",
        "14 March 2025, 19:47",
        "Xbox controller on a box",
        "card ending 4821",
        "2026",
    ],
)
def test_find_placeholders_passes_realistic_values(text):
    assert find_placeholders(text) == []


def test_synthetic_values_are_realistic_and_seeded():
    keys = ["payer", "payee", "amount", "reference", "timestamp", "institution", "phone"]
    for s in range(50):
        v = synthetic_values(keys, rng_for(s, "sv"))
        assert all(find_placeholders(x) == [] for x in v.values())
        assert v["payer"] != v["payee"]
    assert synthetic_values(keys, rng_for(1)) == synthetic_values(keys, rng_for(1))


def test_build_prompt_validator_catches_broken_records():
    cat = get_category("P3")
    sc = sample_scenarios(cat, np.random.default_rng(0), 1)[0]
    rec = build_prompt(sc, np.random.default_rng(0), cat)
    assert validate_prompt_record(rec, cat) == []
    no_time = rec.model_copy(update={"prompt": rec.prompt.split(" A visible time element")[0]})
    assert any("time element" in f for f in validate_prompt_record(no_time, cat))
    bad = rec.model_copy(update={"prompt": rec.prompt + " Plate XX-1234."})
    assert any("placeholder" in f for f in validate_prompt_record(bad, cat))


def test_dedupe_keep_first():
    a = "Aerial photo of a flooded street with rescue boats at dawn in March"
    b = "Aerial photo of flooded streets with a rescue boat at dawn in March"  # plural variant
    c = "Screenshot of a chat between two flatmates about a broken fridge"
    assert dedupe([a, b, c], 0.6) == [a, c]
    assert dedupe([b, a, c], 0.6) == [b, c]
    assert dedupe([a, b, c], 1.01) == [a, b, c]  # threshold above 1 keeps everything
    assert dedupe([a, a.upper()], 0.99) == [a]


def test_dedupe_removes_generated_near_duplicates():
    cat = get_category("P1")
    sc = sample_scenarios(cat, np.random.default_rng(0), 1)[0]
    recs = [build_prompt(sc, np.random.default_rng(5), cat) for _ in range(3)]  # identical
    recs.append(
        build_prompt(
            sample_scenarios(get_category("I3"), np.random.default_rng(1), 1)[0],
            np.random.default_rng(1),
        )
    )
    kept = dedupe(recs)
    assert [r.category for r in kept] == ["P1", "I3"] and kept[0] is recs[0]


# ---------------------------------------------------------------- LLM-driven variant


def test_llm_variant_render_parse_validate():
    cat = get_category("I2")
    system, user, pid, phash = render("scenario_expansion", **scenario_expansion_vars(cat, 4))
    assert "I2" in user and "payment screenshots" not in user and pid == "scenario_expansion@1"
    reply = ScenarioExpansion.model_validate(
        {
            "scenarios": [
                {
                    "content": "a refund approval notice in an e-commerce app",
                    "media_form": "electronic device screenshot",
                    "detail": "a refund of a damaged lamp",
                    "risk_focus": "refund fraud",
                },
                {
                    "content": "a payment receipt",
                    "media_form": "oil painting",
                    "detail": "x",
                    "risk_focus": "fraud",
                },
            ]
        }
    )
    scenarios, failures = scenarios_from_llm(cat, reply)
    assert len(scenarios) == 1 and scenarios[0].source == "llm" and len(failures) == 1

    sc = scenarios[0]
    system, user, pid, phash = render("prompt_5w1h", **prompt_5w1h_vars(sc))
    assert "never placeholders" in user and "Who:" in user
    good = FiveW1HPrompt(
        who="a small online seller, Renata Duarte",
        what="a refund approval notice for €48.20",
        when="Friday 9 May 2025 at 18:22",
        where="a fictional marketplace app on a phone",
        why="a dispute over a parcel that arrived damaged",
        how="a crisp full-screen capture with the status bar visible",
        prompt=(
            "Electronic device screenshot of a refund approval notice in an e-commerce app "
            "for €48.20 to Renata Duarte, a small online seller, shown in a fictional "
            "marketplace app on Friday 9 May 2025 at 18:22 after a dispute over a parcel "
            "that arrived damaged; a crisp full-screen capture with the status bar visible, "
            "reference REF5820197346."
        ),
    )
    rec, fails = record_from_llm(sc, good, pid, phash)
    assert fails == [] and isinstance(rec, PromptRecord) and rec.prompt_template_hash == phash
    bad = good.model_copy(
        update={"prompt": good.prompt.replace("REF5820197346", "REF1234"), "who": "someone"}
    )
    _, fails = record_from_llm(sc, bad, pid, phash)
    assert any("placeholder" in f for f in fails) and any("who" in f for f in fails)


def test_content_level_slots_keep_prompts_coherent(prompts):
    for r in prompts:
        item = get_category(r.category).content_item(r.scenario.content)
        if item.who:
            assert r.fields.who in item.who
        if item.where:
            assert r.fields.where in item.where
        if item.why:
            assert r.fields.why in item.why
        if item.details:
            assert r.scenario.detail in item.details
        if r.category.startswith("P") and "night" in r.scenario.content:
            hour = int(r.fields.when.split("around ")[1][:2])
            assert hour >= 21 or hour <= 4


def test_unknown_media_tag_is_rejected(tmp_path):
    text = TAXONOMY_PATH.read_text().replace(
        "media: [photograph of a printed paper receipt]}", "media: [a fax]}", 1
    )
    bad = tmp_path / "taxonomy.yaml"
    bad.write_text(text)
    with pytest.raises(ValueError, match="unknown media forms"):
        load_taxonomy(bad)


PAPER_NAMES = {  # SafeIMG Table 1, verbatim
    "P1": "Natural Disasters",
    "P2": "Social Unrest, Public Violence, and Attack Incidents",
    "P3": "Transportation Accidents",
    "P4": "Fires, Explosions, and Energy Facility Accidents",
    "P5": "Pollution and Hazardous Material Accidents",
    "P6": "Building and Civil Infrastructure Accidents",
    "P7": "Crowd Gathering and Venue Safety Accidents",
    "P8": "Public Health and Biosecurity Events",
    "I1": "Personal Accidents and Emergencies",
    "I2": "Private Receipts and Transaction Records",
    "I3": "Personal Chat and Communication Records",
    "I4": "Fabricated Scene Evidence and Identity Endorsement",
}


def test_category_names_are_the_papers():
    assert {c.id: c.name for c in load_taxonomy()} == PAPER_NAMES
