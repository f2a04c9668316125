"""FakeBench stages end to end: items offline (clues from measured diffs), with an author model
in fault-finding mode, answers and scores through the fake OpenAI server, hand-checked numbers."""

from __future__ import annotations

import json
import math

import pytest

from forenset.backends.llm import reset_stage
from forenset.benchmarks.fakebench import text as fb
from forenset.benchmarks.fakebench.report import pivot_scores
from forenset.config import validate_config
from forenset.testing.fake_openai import FakeOpenAI, request_images, request_text
from tests.conftest import small_config_dict
from tests.helpers import rows, run_local
from tests.scorers.scorer_kit import save_encoder
from tests.stages.scripted import llm

STAGES = ("fakebench_items", "fakebench_answers", "fakebench_scores")
GOLD_EDGE = "The edge of the cup is jagged."
GOLD_TEXTURE = "The wall is too smooth."


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setenv("FAKE_OPENAI_KEY", "sk-test-openai")
    for s in STAGES:
        for seed in range(5):
            reset_stage(s, seed)
    yield


def config(tmp_path, **fakebench):
    fbc = {"enabled": True, "split": "train", "fakes": 2, "reals": 2, **fakebench}
    return validate_config(
        small_config_dict(tmp_path / "run", evaluation={"enabled": False}, fakebench=fbc)
    )


def ok(store, stage):
    return [r for r in rows(store, stage) if r["status"] == "ok"]


def test_offline_items_balanced_forms_and_clues_from_measured_diffs(tmp_path):
    store, stats, executed = run_local(config(tmp_path))
    items = rows(store, "fakebench_items")
    fc = [r for r in items if r["task"] == "fakeclass"]
    assert len(fc) == 4 and {r["label"] for r in fc} == {"real", "fake"}
    for label in ("real", "fake"):  # forms balanced within each label
        forms = [r["form"] for r in fc if r["label"] == label]
        assert sorted(forms) == ["what", "yes_no"]
    for r in fc:
        assert (r["question"], r["answer"]) == fb.fakeclass_question(
            r["form"], {fb.Q_FAKE: "fake", fb.Q_REAL: "real"}.get(r["question"]), r["label"]
        )
    clues = [r for r in items if r["task"] == "fakeclue"]
    assert len(clues) == 2 and all(r["label"] == "fake" for r in clues)
    for r in clues:
        if r["status"] != "ok":  # an honest error: nothing measured to write from
            assert "no measured difference" in r["error"]
            continue
        assert r["golden_source"] == "offline-diff" and r["backend"] == "offline"
        cl = json.loads(r["clues"])
        assert r["answer"] == fb.clue_text(cl) and 1 <= len(cl) <= 5
        assert r["dimensions"] and set(r["dimensions"]) <= set(fb.DIMENSIONS)
        qa = [q for q in items if q["task"] == "fakeqa" and q["sample_id"] == r["sample_id"]]
        assert sorted(q["dimension"] for q in qa) == sorted(r["dimensions"])
        assert all(q["question"] == fb.fakeqa_question(q["dimension"]) for q in qa)
    # no evaluated model: nothing to answer or score
    assert not rows(store, "fakebench_answers") and not rows(store, "fakebench_scores")


def scripted(body):
    text = request_text(body)
    if "Golden answer:" in text:  # the judge reads text only
        assert not request_images(body)
        return {"completeness": 2, "preciseness": 1, "relevance": 2}
    assert request_images(body), "every question and author request carries its image"
    if fb.FAULT_FINDING_QUESTION in text and "Example 1" not in text:
        return GOLD_TEXTURE  # an evaluated model in fault-finding mode (zero-shot)
    if fb.FAULT_FINDING_QUESTION in text:  # the golden-clue author (few-shot)
        return {
            "clues": [
                {"dimension": "edge", "clue": GOLD_EDGE},
                {"dimension": "texture", "clue": GOLD_TEXTURE},
            ]
        }
    if "<reasoning>your step-by-step" in text:
        return f"<reasoning>{GOLD_EDGE}</reasoning>\n<answer>fake</answer>"
    if fb.Q_FAKE in text:
        return "Yes, it is."
    if fb.Q_REAL in text:
        return "fake"  # §3.2: wrong whatever the label
    if fb.Q_WHAT in text:
        return "It is fake."
    if "How is the edge" in text:
        return GOLD_EDGE
    return "Looks fine"  # no token in common with the golden answer (not even a period)


def test_author_answers_and_scores_against_the_fake_server(tmp_path):
    with FakeOpenAI(reply=scripted) as srv:
        pool = llm("openai", srv)
        cfg = config(
            tmp_path,
            author=pool,
            models=[{"name": "vlm-a", "llm": pool}],
            judge=pool,
            similarity_model=str(save_encoder(tmp_path / "encoder")),
            clue_modes=["inference", "fault_finding"],
        )
        store, stats, executed = run_local(cfg)
        texts = [request_text(b) for b in srv.requests]
    assert not any(stats[s].failures for s in STAGES)
    items = ok(store, "fakebench_items")
    clue = [r for r in items if r["task"] == "fakeclue"]
    assert sorted(r["form"] for r in clue) == ["fault_finding"] * 2 + ["inference"] * 2
    assert all(r["golden_source"] == "model" for r in clue)
    assert all(r["answer"] == f"{GOLD_EDGE} {GOLD_TEXTURE}" for r in clue)
    qa = [r for r in items if r["task"] == "fakeqa"]
    assert len(qa) == 4
    # each FakeQA question in its own request: no request holds two questions
    asked = [t for t in texts if "Golden answer:" not in t]
    assert sum("regarding the authenticity" in t for t in asked) == 4
    assert all(t.count("regarding the authenticity") <= 1 for t in asked)
    # the author was told the authenticity and given demonstrations
    author = [t for t in texts if fb.FAULT_FINDING_QUESTION in t and "Example 1" in t]
    assert len(author) == 2  # one fault-finding author call per fake, demonstrations included
    answers = ok(store, "fakebench_answers")
    assert len(answers) == len(items)
    cl = [a for a in answers if a["task"] == "fakeclue" and "fault_finding" not in a["item_id"]]
    assert len(cl) == 2
    assert all(a["verdict"] == "fake" and a["response"] == GOLD_EDGE for a in cl)
    ff = [a for a in answers if a["item_id"].endswith("/fault_finding")]
    assert len(ff) == 2 and all(a["verdict"] is None and a["response"] == GOLD_TEXTURE for a in ff)
    # judge: 5 rounds per FakeClue (two modes) and FakeQA item
    assert sum("Golden answer:" in t for t in texts) == 5 * (2 * 2 + 4)

    sc = pivot_scores(ok(store, "fakebench_scores"))
    fc = [r for r in items if r["task"] == "fakeclass"]
    want = sum(
        (r["question"] == fb.Q_FAKE and r["label"] == "fake")
        or (r["question"] == fb.Q_WHAT and r["label"] == "fake")
        for r in fc
    ) / len(fc)
    assert sc["vlm-a/fakeclass/all=all"]["accuracy"] == pytest.approx(want)
    assert sc["vlm-a/fakeclass/label=real"]["accuracy"] == 0.0
    assert sc["vlm-a/fakeclass/form=what"]["n"] == 2
    clue_row = sc["vlm-a/fakeclue/mode=inference"]
    # 13a tokens: hypothesis 7 words + "." = 8, reference 14; every hypothesis token matches,
    # so BLEU-1 = BP = exp(1 - 14/8)
    assert clue_row["bleu1"] == pytest.approx(math.exp(1 - 14 / 8))
    # ROUGE-L: LCS 7 of 7 and 12 tokens -> F = 2 * 1 * 7/12 / (1 + 7/12) = 14/19
    assert clue_row["rouge_l"] == pytest.approx(14 / 19)
    assert clue_row["accuracy"] == 1.0
    ff_row = sc["vlm-a/fakeclue/mode=fault_finding"]
    # "The wall is too smooth ." (6 tokens, all in the 14-token golden clue): BLEU-1 = BP
    assert ff_row["bleu1"] == pytest.approx(math.exp(1 - 14 / 6))
    assert ff_row["accuracy"] is None and ff_row["n"] == 2
    assert clue_row["completeness"] == 2 and clue_row["preciseness"] == 1
    assert -1 <= clue_row["similarity"] <= 1 and clue_row["similarity_model"].endswith("encoder")
    assert sc["vlm-a/fakeqa/dimension=edge"]["similarity"] == pytest.approx(1.0, abs=1e-5)
    qa_row = sc["vlm-a/fakeqa/all=all"]
    # per image: edge answered exactly (1), texture not at all (0) -> 0.5; then over images
    assert qa_row["bleu1"] == pytest.approx(0.5) and qa_row["rouge_l"] == pytest.approx(0.5)
    assert sc["vlm-a/fakeqa/dimension=edge"]["bleu2"] == pytest.approx(1.0)
    # Tables 5-7: automatic Aver. of bleu1, bleu2, rouge_l = .5 and similarity; judged Aver. of
    # completeness 2, preciseness 1, relevance 2 (0-2); Overall = (auto + judged / 2) / 2
    auto = (0.5 * 3 + qa_row["similarity"]) / 4
    assert qa_row["auto_average"] == pytest.approx(auto)
    assert qa_row["judged_average"] == pytest.approx(5 / 3)
    assert qa_row["average"] == pytest.approx((auto + 5 / 6) / 2)
    assert qa_row["average_of"].split(",") == [
        "bleu1", "bleu2", "rouge_l", "similarity", "completeness", "preciseness", "relevance",
    ]  # fmt: skip


def test_human_edited_clues_replace_the_golden_clue(tmp_path):
    store, _, _ = run_local(config(tmp_path))
    clue = [r for r in ok(store, "fakebench_items") if r["task"] == "fakeclue"]
    assert clue, "the demo data gives at least one offline clue"
    sid = clue[0]["sample_id"]
    export = [
        {
            "data": {"sample_id": sid},
            "annotations": [
                {"result": [{"from_name": fb.CLUE_FIELD, "type": "textarea",
                             "value": {"text": ["A person wrote this clue."]}}]}
            ],
        }
    ]  # fmt: skip
    export.append({**export[0], "data": {"sample_id": "no-such-sample"}})
    path = tmp_path / "ls.json"
    path.write_text(json.dumps(export))
    store, _, executed = run_local(config(tmp_path, clue_edits=str(path)))
    assert executed["fakebench_items"] == 1
    got = {r["sample_id"]: r for r in ok(store, "fakebench_items") if r["task"] == "fakeclue"}
    assert got[sid]["answer"] == "A person wrote this clue."
    assert got[sid]["golden_source"] == "human-edited"
    assert all(r["golden_source"] == "offline-diff" for s, r in got.items() if s != sid)
    (bad,) = [r for r in rows(store, "fakebench_items") if r["item_id"].endswith("not-applied")]
    assert bad["status"] == "error" and "1 edited clue in ls.json" in bad["error"]
    assert "no-such-sample" in bad["error"]


def test_constant_reference_scores_exactly_the_share_of_its_belief(tmp_path):
    model = {"name": "always-fake", "kind": "constant", "belief": "fake"}
    store, _, _ = run_local(config(tmp_path, models=[model]))
    sc = pivot_scores(ok(store, "fakebench_scores"))
    # "Yes." to "fake?", "No." to "real?", "fake" to "what?": right on fakes, wrong on reals
    assert sc["always-fake/fakeclass/label=fake"]["accuracy"] == 1.0
    assert sc["always-fake/fakeclass/label=real"]["accuracy"] == 0.0
    assert sc["always-fake/fakeclass/all=all"]["accuracy"] == 0.5
    gens = {r["group"]: r for r in sc.values() if r["group_kind"] == "generator"}
    assert gens["real"]["accuracy"] == 0.0 and "real" in gens and len(gens) >= 2
    assert all(r["accuracy"] == 1.0 for g, r in gens.items() if g != "real")
    assert sum(r["n"] for r in gens.values()) == sc["always-fake/fakeclass/all=all"]["n"]
    # issue 31: n, a seeded interval or its reason, and a caveat on degenerate sets
    long = {r["score_id"]: r for r in ok(store, "fakebench_scores")}
    for r in long.values():
        assert r["n"] is not None and r["metric"]
        if r["ci_low"] is None:
            assert r["ci_reason"], r["score_id"]
        else:
            # (the bootstrap's numpy means may differ from fmean's in the last bit)
            assert r["ci_low"] - 1e-9 <= r["value"] <= r["ci_high"] + 1e-9, r["score_id"]
    fake = long["always-fake/fakeclass/label=fake/accuracy"]
    assert (fake["ci_low"], fake["ci_high"]) == (1.0, 1.0)  # every resample is all right
    assert "no real images" not in (fake["caveat"] or "")  # one class by design (Table 4)
    overall = long["always-fake/fakeclass/all=all/accuracy"]
    assert overall["n"] < 10 and "below the minimum of 10" in overall["caveat"]
    clue = sc.get("always-fake/fakeclue/mode=inference")
    if clue is not None:  # the verdict after its (empty) reasoning is always fake
        assert clue["accuracy"] == 1.0 and clue["completeness"] is None
        assert clue["completeness_reason"].startswith("no judge")
    answers = ok(store, "fakebench_answers")
    assert {(a["backend"], a["model"]) for a in answers} == {("offline", "constant-fake")}
    # the same numbers in `forenset fakebench RUN_DIR` and in the HTML report
    from typer.testing import CliRunner

    from forenset.cli import app
    from forenset.report.html import render_report

    res = CliRunner().invoke(app, ["fakebench", str(store.root)])
    assert res.exit_code == 0, res.output
    assert "FakeClass" in res.output and "always-fake" in res.output
    # a few FakeClass items: every number is under min_n (10), shown as not meaningful, never as a
    # result, with its caveat under the tables
    assert "not meaningful" in res.output and "is below the minimum of 10" in res.output
    assert "no judge model configured" in res.output  # the dash's reason
    html = render_report(store, gallery=0)
    assert "<h2>FakeBench</h2>" in html and "always-fake" in html


def test_fakebench_command_without_scores_says_why(tmp_path):
    from typer.testing import CliRunner

    from forenset.cli import app

    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "state.json").write_text("{}")  # a run (a bare folder is refused)
    res = CliRunner().invoke(app, ["fakebench", str(tmp_path / "empty")])
    assert res.exit_code == 2 and "no fakebench_scores" in res.output


def test_the_fakebench_example_config_validates():
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[2]
    cfg = validate_config(yaml.safe_load((root / "examples" / "fakebench.yaml").read_text()))
    kinds = [m.kind for m in cfg.fakebench.models]
    assert cfg.fakebench.enabled and kinds == ["constant", "constant", "detector"]


def test_changing_one_part_recomputes_only_what_depends_on_it(tmp_path):
    fake = {"name": "always-fake", "kind": "constant", "belief": "fake"}
    real = {"name": "always-real", "kind": "constant", "belief": "real"}
    run_local(config(tmp_path, models=[fake]))
    _, _, again = run_local(config(tmp_path, models=[fake]))
    assert not any(again[s] for s in STAGES)
    _, _, judge = run_local(config(tmp_path, models=[fake], judge_rounds=3))
    assert (judge["fakebench_items"], judge["fakebench_answers"], judge["fakebench_scores"]) == (
        0, 0, 1,
    )  # fmt: skip
    store, _, more = run_local(config(tmp_path, models=[fake, real], judge_rounds=3))
    assert (more["fakebench_items"], more["fakebench_answers"], more["fakebench_scores"]) == (
        0, 1, 1,
    )  # fmt: skip
    assert {r["answerer"] for r in ok(store, "fakebench_scores")} == {"always-fake", "always-real"}


def test_failed_judge_rounds_are_left_out_and_asked_again_on_rebuild(tmp_path):
    from forenset.testing._base import Fault

    model = {"name": "always-fake", "kind": "constant", "belief": "fake"}
    with FakeOpenAI(reply=scripted) as srv:
        srv.fault_for = lambda body: (
            Fault(status=500) if "How is the" in request_text(body) else None
        )
        cfg = config(tmp_path, models=[model], judge=llm("openai", srv), judge_rounds=2)
        store, _, _ = run_local(cfg)
        every = rows(store, "fakebench_scores")
        got = pivot_scores(every)
        (bad,) = [r for r in every if r["status"] == "error"]
        assert bad["retryable"] and "judge round" in bad["error"]
        qa = got["always-fake/fakeqa/all=all"]  # every FakeQA round failed: null with the error
        assert qa["completeness"] is None and "500" in qa["completeness_reason"]
        assert got["always-fake/fakeclue/mode=inference"]["completeness"] == 2
        srv.fault_for = None
        store, _, again = run_local(cfg)
    assert again["fakebench_scores"] == 1 and again["fakebench_items"] == 0
    every = rows(store, "fakebench_scores")
    got = pivot_scores(every)
    assert all(r["status"] == "ok" for r in every)
    assert got["always-fake/fakeqa/all=all"]["completeness"] == 2


def test_detector_model_answers_all_three_tasks_from_what_it_measured(tmp_path):
    from forenset.benchmarks.common.detector import ForensicDetector
    from forenset.benchmarks.fakebench.stages.fakebench_answers import (
        DETECTOR_DIMENSIONS,
        constant_reply,
        detector_qa,
    )
    from forenset.images import decode_rgb

    det = {"name": "forensic", "kind": "detector", "train_per_class": 4}
    cfg = config(tmp_path, split="test", models=[det], clue_modes=["inference", "fault_finding"])
    store, _, _ = run_local(cfg)
    items = {r["item_id"]: r for r in ok(store, "fakebench_items")}
    answers = {a["item_id"]: a for a in rows(store, "fakebench_answers")}
    assert answers and all(a["status"] == "ok" for a in answers.values())
    assert set(answers) == set(items)
    assert {(a["backend"], a["model"]) for a in answers.values()} == {
        ("offline", "forensic-logreg-v2")
    }
    assert {i["task"] for i in items.values()} >= {"fakeclass", "fakeclue", "fakeqa"}
    # one image, one decision: FakeClass and FakeClue agree per sample
    verdict = {
        a["sample_id"]: a["verdict"]
        for a in answers.values()
        if a["task"] == "fakeclue" and items[a["item_id"]]["form"] == "inference"
    }
    for iid, a in answers.items():
        it = items[iid]
        if it["task"] == "fakeclass":
            keys = fb.answer_keywords(it["form"], a["response"])
            assert len(keys) == 1  # exactly one keyword of the question's form (§3.2)
            decided = keys.pop()
            if it["form"] == "yes_no":  # yes to "fake?" / no to "real?" means fake
                asks = "fake" if it["question"] == fb.Q_FAKE else "real"
                decided = asks if decided == "yes" else ({"fake", "real"} - {asks}).pop()
            if a["sample_id"] in verdict:
                assert decided == verdict[a["sample_id"]]
        elif it["task"] == "fakeclue" and it["form"] == "inference":
            assert a["verdict"] in ("real", "fake") and a["parse_error"] is None
            assert "sigma" in a["response"] or "uniform" in a["response"]
            assert a["reply"].endswith(f"<answer>{a['verdict']}</answer>")
        elif it["task"] == "fakeclue":  # fault finding: the same measurement, no verdict asked
            inference = answers[it["item_id"].removesuffix("/fault_finding")]
            assert a["verdict"] is None and a["response"] == inference["response"]
        else:
            measured = it["dimension"] in DETECTOR_DIMENSIONS
            assert (a["response"] is not None) == measured or "uniform" in (a["null_reason"] or "")
            if a["response"] is None:
                assert it["dimension"] in a["null_reason"] and a["reply"] is None
            else:
                assert "sigma" in a["response"] and a["null_reason"] is None

    # hand-check one image: retrain the same draw, explain it, rebuild the expected answers
    from forenset.benchmarks.common.responders import DetectorConfig
    from forenset.benchmarks.common.training import training_draw
    from forenset.tasks.base import StageContext

    splits = rows(store, "splits")
    train = [r for r in splits if r["status"] == "ok" and r["split"] == "train"]
    d = DetectorConfig(name="forensic", train_per_class=4)
    chosen = training_draw(StageContext(store, cfg).seed, d, train)
    fresh_det = ForensicDetector("logreg").fit(
        [decode_rgb(store.get_blob(r["blob"])) for r in chosen], [r["label"] for r in chosen]
    )
    fc = next(i for i in items.values() if i["task"] == "fakeclass")
    found = fresh_det.explain(decode_rgb(store.get_blob(fc["blob"])))
    want = constant_reply(found.answer, "fakeclass", fc["form"], fc["question"])
    assert answers[fc["item_id"]]["response"] == want
    right = fb.exact_match(fc["form"], fc["answer"], want)
    assert right == (found.answer == fc["label"])
    for iid, it in items.items():
        if it["task"] == "fakeqa" and it["sample_id"] == fc["sample_id"]:
            text, why = detector_qa(it["dimension"], found)
            assert (answers[iid]["response"], answers[iid]["null_reason"]) == (text, why)

    # scores exist for all three tasks; FakeClass accuracy is the exact-match share
    sc = pivot_scores(ok(store, "fakebench_scores"))
    fcs = [i for i in items.values() if i["task"] == "fakeclass"]
    acc = sum(
        fb.exact_match(i["form"], i["answer"], answers[i["item_id"]]["response"]) for i in fcs
    )
    assert sc["forensic/fakeclass/all=all"]["accuracy"] == pytest.approx(acc / len(fcs))
    assert sc["forensic/fakeclue/mode=inference"]["bleu1"] is not None
    assert sc["forensic/fakeclue/mode=fault_finding"]["bleu1"] is not None
    assert sc["forensic/fakeqa/all=all"]["bleu1"] is not None


def test_detector_model_is_not_evaluated_on_its_training_split(tmp_path):
    from forenset.confbase import ConfigError

    with pytest.raises(ConfigError, match="evaluate them on split validation or test"):
        config(tmp_path, models=[{"name": "forensic", "kind": "detector"}])


def test_detector_qa_answers_only_dimensions_it_measures():
    from forenset.benchmarks.common.detector import Detection
    from forenset.benchmarks.fakebench.stages.fakebench_answers import detector_qa

    found = Detection(
        answer="fake", p_fake=0.9, bbox=[0.0, 0.5, 0.25, 1.0], position="bottom left",
        evidence={"noise": -3.14, "sharpness": 0.2, "ela": 0.5, "chroma": -0.3},
        reasoning="r", reply="r",
    )  # fmt: skip
    text, why = detector_qa("texture", found)
    assert why is None and text == (
        "In the bottom left of the image (x 0.00-0.25, y 0.50-1.00), the region that departs "
        "most from the rest, noise residual energy is 3.1 sigma below the rest and JPEG error "
        "level is 0.5 sigma above the rest and colour-channel noise correlation is 0.3 sigma "
        "below the rest; the texture there does not match the rest of the image."
    )
    calm = Detection(**{**found.__dict__, "evidence": {"noise": 0.4, "sharpness": -0.6}})
    text, why = detector_qa("clarity", calm)
    assert why is None and text.endswith("within 1 sigma, the clarity shows no sign of editing.")
    text, why = detector_qa("perspective", found)
    assert text is None and "none of them bears on perspective" in why
    blank = Detection(**{**found.__dict__, "bbox": None, "position": None, "evidence": {}})
    text, why = detector_qa("texture", blank)
    assert text is None and "no region to compare" in why
