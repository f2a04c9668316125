import numpy as np
import pytest
from pydantic import ValidationError
from skimage import data
from skimage.transform import resize

from forenset.text.instructions import (
    OFFLINE_KINDS,
    InstructionConfig,
    family_balance,
    grounding_failure,
    offline_instructions,
    rate_difficulty,
    validate_instructions,
)
from forenset.text.models import FAMILY_KINDS, EditInstruction, EditInstructionSet

VPOS = ("upper", "middle", "lower")
HPOS = ("left", "centre", "right")


def grid_regions(img: np.ndarray, extra: list[dict]) -> list[dict]:
    """Regions as a caller would compute them: 3x3 cells named by brightness, plus entities."""
    small = resize(img, (48, 48), anti_aliasing=True, preserve_range=True)
    regions = []
    for i in range(3):
        for j in range(3):
            cell = small[16 * i : 16 * (i + 1), 16 * j : 16 * (j + 1)]
            rgb = cell.reshape(-1, 3).mean(0)
            tone = "dark" if rgb.mean() < 90 else ("bright" if rgb.mean() > 170 else "grey")
            regions.append(
                {
                    "bbox": [j / 3, i / 3, (j + 1) / 3, (i + 1) / 3],
                    "name": f"the {tone} region at {VPOS[i]} {HPOS[j]}",
                    "area": 1 / 9,
                    "mean_rgb": [float(v) for v in rgb],
                }
            )
    for e in extra:
        x0, y0, x1, y1 = e["bbox"]
        h, w = img.shape[:2]
        patch = img[int(y0 * h) : int(y1 * h), int(x0 * w) : int(x1 * w)]
        regions.append(
            {
                **e,
                "area": (x1 - x0) * (y1 - y0),
                "mean_rgb": [float(v) for v in patch.reshape(-1, 3).mean(0)],
            }
        )
    return regions


CASES = {
    "astronaut": (
        data.astronaut(),
        "An astronaut in a white spacesuit sits in the centre holding a helmet; a flag hangs at "
        "the upper right and a model of a shuttle stands at the upper left.",
        [
            {"bbox": [0.2, 0.15, 0.75, 0.95], "name": "the astronaut"},
            {"bbox": [0.72, 0.02, 0.98, 0.3], "name": "the flag"},
            {"bbox": [0.3, 0.55, 0.5, 0.8], "name": "the helmet"},
        ],
    ),
    "coffee": (
        data.coffee(),
        "A white cup of coffee on a saucer sits on a wooden table, with a spoon beside the cup.",
        [
            {"bbox": [0.12, 0.05, 0.9, 0.75], "name": "the cup"},
            {"bbox": [0.55, 0.65, 0.95, 0.85], "name": "the spoon"},
        ],
    ),
    "chelsea": (
        data.chelsea(),
        "A tabby cat lies on a rug and looks to the right; its ears point up.",
        [
            {"bbox": [0.1, 0.05, 0.9, 0.95], "name": "the cat"},
            {"bbox": [0.2, 0.05, 0.4, 0.25], "name": "the left ear"},
        ],
    ),
}
KEYS = {
    "idx",
    "instruction_id_suffix",
    "text",
    "family",
    "kind",
    "target",
    "location_hint",
    "bbox",
    "change_bbox",
    "expected_change",
    "difficulty",
    "params",
}


def _boxes_overlap(a, b):
    return not (a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1])


@pytest.mark.parametrize("name", sorted(CASES))
def test_offline_instructions_for_real_photos(name):
    img, caption, entities = CASES[name]
    regions = grid_regions(img, entities)
    sets = [offline_instructions(caption, regions, np.random.default_rng(s)) for s in range(12)]
    all_fams = {i["family"] for ins in sets for i in ins}
    for ins in sets:
        assert 2 <= len(ins) <= 4
        assert validate_instructions(ins, caption, regions=regions) == []
        for k, it in enumerate(ins):
            assert KEYS <= set(it) and it["idx"] == k
            assert it["kind"] in OFFLINE_KINDS and it["family"] in OFFLINE_KINDS[it["kind"]]
            assert it["kind"] in FAMILY_KINDS[it["family"]]
            assert 1 <= it["difficulty"] <= 5
            x0, y0, x1, y1 = it["change_bbox"]
            assert 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1
            if it["kind"] == "copy_move":
                assert not _boxes_overlap(it["params"]["src_bbox"], it["params"]["dst_bbox"])
            if it["kind"] == "recolor":
                src = next(r for r in regions if r["name"] == it["target"])
                dist = np.linalg.norm(np.array(it["params"]["rgb"]) - np.array(src["mean_rgb"]))
                assert dist >= 100
            if it["kind"] == "splice":
                anchor = next(r["bbox"] for r in regions if r["name"] in it["location_hint"])
                d = it["params"]["dst_bbox"]
                assert anchor[0] <= d[0] and d[2] <= anchor[2] and anchor[1] <= d[1]
        # families are distinct within a set while unused ones remain
        fams = [i["family"] for i in ins]
        assert len(set(fams)) == min(len(fams), len(all_fams))


def test_offline_is_deterministic_and_seed_sensitive():
    img, caption, ents = CASES["astronaut"]
    regions = grid_regions(img, ents)
    a = offline_instructions(caption, regions, np.random.default_rng(7))
    b = offline_instructions(caption, regions, np.random.default_rng(7))
    assert a == b
    outs = {str(offline_instructions(caption, regions, np.random.default_rng(s))) for s in range(8)}
    assert len(outs) > 4


def test_offline_covers_every_executable_kind_and_respects_weights():
    img, caption, ents = CASES["astronaut"]
    regions = grid_regions(img, ents)
    rows = []
    for s in range(60):
        rows += offline_instructions(caption, regions, np.random.default_rng(s))
    assert {r["kind"] for r in rows} == set(OFFLINE_KINDS)
    assert {r["family"] for r in rows} == {"person", "object", "geometry", "scene"}
    # person-centric edits only target the person
    assert all(r["target"] == "the astronaut" for r in rows if r["family"] == "person")
    cfg = InstructionConfig(
        family_weights={"object": 1.0, "geometry": 0.0, "scene": 0.0, "person": 0.0},
        distinct_families=False,
    )
    rows = [
        r
        for s in range(20)
        for r in offline_instructions(caption, regions, np.random.default_rng(s), cfg)
    ]
    assert rows and {r["family"] for r in rows} == {"object"}


def test_no_person_body_edits_on_children_and_empty_when_no_region_fits():
    regions = [
        {"bbox": [0.2, 0.2, 0.6, 0.9], "name": "the child", "area": 0.28, "mean_rgb": [120, 90, 80]}
    ]
    for s in range(20):
        ins = offline_instructions("A child stands on grass.", regions, np.random.default_rng(s))
        assert all(i["family"] != "person" for i in ins)
    tiny = [{"bbox": [0.0, 0.0, 0.01, 0.01], "name": "a speck", "area": 1e-4}]
    cfg = InstructionConfig(family_weights={"object": 1.0})
    assert offline_instructions("A speck.", tiny, np.random.default_rng(0), cfg) == []


def test_family_balance_table():
    rows = [
        {"family": "object", "kind": "removal"},
        {"family": "object", "kind": "copy_move"},
        {"family": "scene", "kind": "lighting"},
        {"family": "scene", "kind": "lighting", "status": "error"},
    ]
    table = family_balance(rows)
    by = {(r["family"], r["kind"]): r for r in table}
    assert by[("object", "*")]["count"] == 2 and by[("scene", "*")]["count"] == 1
    assert by[("object", "removal")]["share"] == pytest.approx(1 / 3)
    assert by[("person", "*")]["count"] == 0
    assert sum(r["target_share"] for r in table if r["kind"] == "*") == pytest.approx(1.0)


# ---------------------------------------------------------------- LLM-side validation

CAPTION = (
    "Two dogs run across a green lawn toward a red ball; a wooden bench stands under a "
    "tree at the left and a woman in a blue coat watches from the path."
)


def ins(**kw):
    base = dict(
        text="Remove the wooden bench under the tree.",
        family="object",
        kind="removal",
        target="the wooden bench",
        location_hint="left, under the tree",
        expected_change="the bench is gone and grass fills its place",
        difficulty=3,
    )
    base.update(kw)
    return base


def test_schema_and_parsing():
    schema = EditInstructionSet.model_json_schema()
    fam = schema["$defs"]["EditInstruction"]["properties"]["family"]
    assert set(fam["enum"]) == {"person", "object", "geometry", "scene"}
    EditInstruction.model_validate(ins())
    with pytest.raises(ValidationError):
        EditInstruction.model_validate(ins(family="sound"))
    with pytest.raises(ValidationError):
        EditInstruction.model_validate(ins(difficulty=9))


def test_valid_set_passes_and_plural_insensitive_grounding():
    good = [
        ins(),
        ins(
            text="Change the colour of the woman's coat to yellow.",
            family="person",
            kind="clothing",
            target="the woman's coats",
            location_hint="on the path",
            expected_change="her coat turns yellow",
        ),
        ins(
            text="Make the sky overcast as before rain.",
            family="scene",
            kind="weather",
            target="the sky",
            location_hint="top of the frame",
            expected_change="grey clouds cover the sky",
        ),
        ins(
            text="Insert a small kite above the dog.",
            family="object",
            kind="insertion",
            target="a small kite",
            location_hint="above the dogs",
            expected_change="a kite appears in the air",
        ),
    ]
    assert validate_instructions(good, CAPTION) == []
    assert grounding_failure("the dog", CAPTION) is None  # caption says "dogs"
    assert grounding_failure("the benches", CAPTION) is None
    assert grounding_failure("the ball", "Children play with balls.") is None
    # the head noun must be grounded, not just a modifier-like word before it
    assert "'house'" in grounding_failure("the tree house", CAPTION)
    assert grounding_failure("the blue coat", CAPTION) is None
    assert "names no concrete entity" in grounding_failure("the left part", CAPTION)
    # a caller's region name is grounded as such
    assert (
        grounding_failure(
            "the dark region at upper left", CAPTION, ["the dark region at upper left"]
        )
        is None
    )


def test_failures_are_reported_per_item():
    bad = [
        ins(text="Remove the bicycle by the bench.", target="the bicycle"),  # not in caption
        ins(
            text="Warp the bench into a curve.", family="scene", kind="liquify", target="the bench"
        ),  # kind/family mismatch
        ins(
            text="Place a gun on the wooden bench.",
            family="object",
            kind="insertion",
            target="a gun",
        ),  # blocked
        ins(text="Remove the whole scene entirely.", target="the whole scene"),
        ins(
            text="Make the tree invisible behind the camera.", target="the tree", kind="replacement"
        ),
    ]
    failures = validate_instructions(bad, CAPTION)
    text = "\n".join(failures)
    assert "expected 2-4" in text
    assert "0: target 'the bicycle'" in text
    assert "1: kind 'liquify' is not a scene-centric kind" in text
    assert "2: blocked content: ['gun']" in text
    assert "3: removal cannot apply to the whole scene" in text
    assert "4: edit cannot be realised" in text


def test_configurable_blocked_list_duplicates_and_children():
    cfg = InstructionConfig(blocked_terms=["bench"])
    assert any("blocked" in f for f in validate_instructions([ins(), ins(idx=1)], CAPTION, cfg))
    dup = validate_instructions([ins(), ins(text="Remove the wooden bench now.")], CAPTION)
    assert any("repeats kind 'removal'" in f for f in dup)
    kid = ins(text="Make the child slimmer.", family="person", kind="liquify", target="the child")
    assert any(
        "child" in f for f in validate_instructions([kid, ins()], "A child sits on a wooden bench.")
    )


def test_difficulty_rule():
    assert rate_difficulty("lighting", 1.0, "scene", {"scope": "global"}) == 1
    assert rate_difficulty("lighting", 0.05, "scene", {"scope": "local"}) == 2
    assert rate_difficulty("recolor", 0.3, "object") == 1
    assert rate_difficulty("liquify", 0.01, "geometry", {"strength": 0.1}) == 5
    assert rate_difficulty("liquify", 0.1, "person", {"strength": 0.4}) == 3
    assert rate_difficulty("copy_move", 0.05, "object") == 3
    assert rate_difficulty("removal", 0.01, "object") == 4


def test_llm_prompt_variables_and_reply_validation():
    from forenset.text.instructions import difficulty_vars, instruction_vars
    from forenset.text.models import DifficultyRatings
    from forenset.text.templates import render

    cfg = InstructionConfig(family_weights={"object": 1.0, "scene": 1.0})
    system, user, pid, phash = render("edit_instructions", **instruction_vars(CAPTION, cfg))
    assert CAPTION in user and "- object: insertion" in user and "- person:" not in user
    assert "gun" in user and pid == "edit_instructions@1" and len(phash) == 64
    reply = EditInstructionSet.model_validate(
        {
            "instructions": [
                ins(),
                ins(
                    text="Make the sky overcast.",
                    family="scene",
                    kind="weather",
                    target="the sky",
                    location_hint="top",
                    expected_change="grey clouds cover the sky",
                ),
            ]
        }
    )
    assert validate_instructions(reply.instructions, CAPTION, cfg) == []
    _, user, _, _ = render("instruction_difficulty", **difficulty_vars(CAPTION, [ins()]))
    assert "0. [object/removal] Remove the wooden bench" in user
    DifficultyRatings.model_validate({"ratings": [{"index": 0, "difficulty": 3, "reason": "r"}]})
