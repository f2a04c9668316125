"""detections: offline, VLM and file detectors on the ID/OOD sets, both tracks, resume and scope."""

from __future__ import annotations

import json

import pytest

from forenset.backends.llm import reset_stage
from forenset.benchmarks.common import respond, training
from forenset.benchmarks.common.answers import parse_answer
from forenset.benchmarks.common.detector import ForensicDetector
from forenset.benchmarks.common.predictions import read_predictions
from forenset.config import validate_config
from forenset.scheduler import BuildFailed
from forenset.testing._base import Fault
from tests.conftest import small_config_dict
from tests.helpers import rows, run_local
from tests.stages.fixtures import *  # noqa: F403 - pytest fixtures (see fixtures.py)
from tests.stages.scripted import llm

COMPLEX_PROMPT = (
    "Detect whether the image is real or fake and provide reasoning for it.\n"
    "Respond in the following format:\n"
    "<reasoning>your reasoning here</reasoning>\n"
    "<answer>real or fake</answer>"
)
SIMPLE_PROMPT = COMPLEX_PROMPT.replace(
    "reasoning for it.",
    "reasoning for it in simple, easy-to-understand, jargon-free language.",
)


@pytest.fixture(autouse=True)
def fresh_detections():
    """A clean error window for the stage and an empty per-process detector cache."""
    reset_stage("detections", 3)
    training._TRAINED.clear()
    yield


def config(tmp_path, detectors=None, **evaluation):
    ev = {"enabled": True, "fakes": 4, "reals": 2, **evaluation}
    if detectors is not None:
        ev["detectors"] = detectors
    return small_config_dict(
        tmp_path / "run",
        splits={
            "fractions": {"train": 0.5, "validation": 0.25, "test": 0.25},
            "holdout_families": ["faulty"],
        },
        evaluation=ev,
        # the held-out generator's clean edits must differ from cv-a's bytes: identical
        # candidates are kept once, under cv-a (ID), and the OOD set would be empty
        generators=[
            {"name": "cv-a", "family": "classical"},
            {
                "name": "cv-faulty",
                "family": "faulty",
                "strength": 1.2,
                "faults": {"missing": 0.3, "offtarget": 0.2, "artifacts": 0.2},
            },
        ],
    )


def items(store):
    return [r for r in rows(store, "eval_sets") if r["status"] == "ok"]


def test_offline_detector_answers_both_sets_and_tracks(tmp_path, monkeypatch):
    fits = []
    real_fit = ForensicDetector.fit

    def counted(self, images, labels):
        fits.append(len(images))
        return real_fit(self, images, labels)

    monkeypatch.setattr(ForensicDetector, "fit", counted)
    store, stats, executed = run_local(validate_config(config(tmp_path)))
    assert executed["detections"] == 2 and not stats["detections"].failures
    assert len(fits) == 1  # the id and ood shards share one trained detector
    got = rows(store, "detections")
    ev = items(store)
    assert {r["eval_set"] for r in ev} == {"id", "ood"}
    assert len(got) == 2 * len(ev)  # one row per eval item per track
    assert {(r["eval_item_id"], r["track"]) for r in got} == {
        (e["eval_item_id"], t) for e in ev for t in ("complex", "simple")
    }
    truth = {e["eval_item_id"]: e["label"] for e in ev}
    for r in got:
        assert r["status"] == "ok" and r["answer"] in ("real", "fake")
        assert r["label"] == truth[r["eval_item_id"]] and r["detector"] == "forensic"
        assert r["backend"] == "offline" and r["model"] == "forensic-logreg-v2"
        assert 0.0 <= r["fake_probability"] <= 1.0 and r["parse_error"] is None
        parsed = parse_answer(r["reply"])  # the reply reads back in the paper's format
        assert parsed.answer == r["answer"] and parsed.reasoning == r["explanation"]
    boxes = [json.loads(r["bbox"]) for r in got if r["bbox"]]
    assert boxes and all(len(b) == 4 and 0 <= b[0] < b[2] <= 1 for b in boxes)
    by = {(r["eval_item_id"], r["track"]): r for r in got}
    for e in ev:  # the simple track is a shorter plain-language sentence, same verdict
        c, s = by[e["eval_item_id"], "complex"], by[e["eval_item_id"], "simple"]
        assert len(s["explanation"]) < len(c["explanation"]) and s["answer"] == c["answer"]
        assert "sigma" not in s["explanation"]


def test_rerun_skips_and_a_new_classifier_recomputes_detections_only(tmp_path):
    d = config(tmp_path)
    store, _, _ = run_local(validate_config(d))
    first = rows(store, "detections")
    _, _, executed = run_local(validate_config(d))
    assert executed["detections"] == 0 and executed["eval_sets"] == 0
    d2 = config(tmp_path, detectors=[{"name": "forensic", "classifier": "hgb"}])
    store, stats, executed = run_local(validate_config(d2))
    assert executed["detections"] == 2 and executed["eval_sets"] == 0
    assert executed["splits"] == 0 and not stats["detections"].failures
    again = rows(store, "detections")
    assert {r["model"] for r in again} == {"forensic-hgb-v2"}
    assert [r["detection_id"] for r in again] == [r["detection_id"] for r in first]


def test_disabled_evaluation_plans_no_detections(tmp_path):
    _, stats, _ = run_local(validate_config(config(tmp_path, enabled=False)))
    assert stats["detections"].planned == 0


def scripted_detector(mod):
    """A VLM that answers by track; the first simple-track request gets a reply without tags."""
    state = {"broken": 0}

    def reply(body):
        text = mod.request_text(body)
        assert mod.request_images(body), "the image is attached"
        if "jargon-free" in text:
            if state["broken"] == 0:
                state["broken"] += 1
                return "I think this image is fake."
            return "<reasoning>The light on the cup looks painted on.</reasoning>\n<answer>fake</answer>"
        return (
            "<reasoning>Noise in the upper left is smoother than elsewhere, consistent with "
            "inpainting.</reasoning>\n<answer>Real</answer>"
        )

    return reply


def test_vlm_detector_end_to_end_with_one_unparseable_reply(tmp_path, server):
    backend, srv, model = server
    srv.reply = scripted_detector(model.m)
    vlm = {"name": "vlm-a", "kind": "vlm", "llm": llm(backend, srv)}
    store, stats, executed = run_local(validate_config(config(tmp_path, detectors=[vlm])))
    assert executed["detections"] == 2 and not stats["detections"].failures
    got = rows(store, "detections")
    ev = items(store)
    assert len(got) == 2 * len(ev) and all(r["status"] == "ok" for r in got)
    assert len(srv.requests) == 2 * len(ev)  # one request per eval item per track
    texts = [model.m.request_text(b) for b in srv.requests]
    assert sum(COMPLEX_PROMPT in t for t in texts) == len(ev)
    assert sum(SIMPLE_PROMPT in t for t in texts) == len(ev)
    broken = [r for r in got if r["answer"] is None]
    assert len(broken) == 1 and broken[0]["track"] == "simple"
    assert broken[0]["parse_error"] == parse_answer("I think this image is fake.").reason
    assert broken[0]["reply"] == "I think this image is fake."
    ok = [r for r in got if r["answer"] is not None]
    assert {(r["track"], r["answer"]) for r in ok} == {("complex", "real"), ("simple", "fake")}
    assert all(r["parse_error"] is None and r["explanation"] for r in ok)
    assert {r["prompt_id"] for r in got} == {"detect_complex@1", "detect_simple@1"}
    assert {r["backend"] for r in got} == {backend} and {r["model"] for r in got} == {
        f"{backend}-fake"
    }
    assert all(r["fake_probability"] is None and r["bbox"] is None for r in got)


def test_vlm_max_attempts_asks_again_after_an_unparseable_reply(tmp_path, server):
    backend, srv, model = server
    srv.reply = scripted_detector(model.m)
    vlm = {"name": "vlm-a", "kind": "vlm", "llm": llm(backend, srv), "max_attempts": 2}
    store, stats, _ = run_local(validate_config(config(tmp_path, detectors=[vlm])))
    got = rows(store, "detections")
    ev = items(store)
    assert all(r["status"] == "ok" and r["answer"] for r in got)
    assert len(srv.requests) == 2 * len(ev) + 1  # the unparseable one was asked once more
    again = [b for b in srv.requests if "Your previous reply was rejected" in json.dumps(b)]
    assert len(again) == 1
    assert "no <answer>" in json.dumps(again[0])  # the parser's reason went back to the model


def test_vlm_transport_failure_is_an_error_row(tmp_path, server):
    backend, srv, model = server
    srv.reply = scripted_detector(model.m)
    srv.fault_for = lambda body: (
        Fault(status=400, message="bad request") if "jargon-free" in model.m.request_text(body)
        else None
    )  # fmt: skip
    vlm = {"name": "vlm-a", "kind": "vlm", "llm": llm(backend, srv)}
    store, stats, _ = run_local(validate_config(config(tmp_path, detectors=[vlm])))
    got = rows(store, "detections")
    simple = [r for r in got if r["track"] == "simple"]
    assert simple and all(r["status"] == "error" and r["error"] for r in simple)
    assert all(r["answer"] is None and r["eval_item_id"] for r in simple)
    assert all(r["status"] == "ok" for r in got if r["track"] == "complex")


# -- file detectors ------------------------------------------------------------------------------


def test_file_detector_reports_every_bad_input_class_and_uses_the_good_lines(tmp_path):
    d = config(tmp_path)
    store, _, _ = run_local(validate_config(d))
    ev = items(store)
    ids = sorted({e["sample_id"] for e in ev})
    assert len(ids) >= 4
    lines = [
        json.dumps(
            {
                "sample_id": ids[0],
                "answer": "Fake",
                "explanation": "Warped edges.",
                "simple_explanation": "The edges bend oddly.",
            }
        ),  # fmt: skip
        json.dumps({"sample_id": ids[1], "answer": "real", "explanation": "Even noise."}),
        json.dumps({"sample_id": ids[1], "answer": "fake", "explanation": "Second guess."}),
        json.dumps({"sample_id": "no-such-sample", "answer": "fake", "explanation": "x"}),
        json.dumps({"sample_id": ids[2], "answer": "fake"}),  # no explanation
        json.dumps({"sample_id": ids[3], "answer": "maybe", "explanation": "Unsure."}),
        "this is not json",
    ]
    data = ("\n".join(lines) + "\n").encode() + (
        b'{"sample_id": "' + ids[2].encode() + b'", "answer": "fake", "explanation": "caf\xe9"}\n'
    )
    path = tmp_path / "preds.jsonl"
    path.write_bytes(data)
    dets = [{"name": "forensic"}, {"name": "mine", "kind": "file", "path": str(path)}]
    store, stats, executed = run_local(validate_config(config(tmp_path, detectors=dets)))
    assert executed["detections"] == 1  # the offline detector's shards are unchanged
    assert not stats["detections"].failures
    mine = [r for r in rows(store, "detections") if r["detector"] == "mine"]
    problems = {r["detection_id"]: r["error"] for r in mine if r["status"] == "error"}
    assert problems == {
        "mine/file-problem/duplicate": "predictions file: 1 line of preds.jsonl repeats a sample "
        f"id already predicted on an earlier line; the first line is used and this is not "
        f"({ids[1]!r} at line 3)",
        "mine/file-problem/unknown_id": "predictions file: 1 line of preds.jsonl names a sample "
        "id the stage did not ask about and is not used ('no-such-sample' at line 4)",
        "mine/file-problem/missing_fields": "predictions file: 1 line of preds.jsonl lacks "
        f"sample_id, answer or explanation and is not used ({ids[2]!r} at line 5)",
        "mine/file-problem/not_a_record": "predictions file: 1 line of preds.jsonl is not a "
        "JSON object and is not used (line 7)",
        "mine/file-problem/not_utf8": "predictions file: 1 line of preds.jsonl is not valid "
        f"UTF-8 text and is not used ({ids[2]!r} at line 8)",
    }
    preds = [r for r in mine if r["status"] == "ok"]
    assert len(preds) == 2 * len(ev)  # every eval item, both tracks, none lost
    by = {(r["sample_id"], r["track"]): r for r in preds}
    assert by[ids[0], "complex"]["answer"] == "fake"
    assert by[ids[0], "complex"]["explanation"] == "Warped edges."
    assert by[ids[0], "simple"]["explanation"] == "The edges bend oddly."
    assert by[ids[1], "simple"]["answer"] == "real"  # the first line of a duplicate
    assert by[ids[1], "simple"]["explanation"] == "Even noise."
    assert by[ids[2], "complex"]["answer"] is None
    assert by[ids[2], "complex"]["parse_error"] == "no prediction in preds.jsonl for this sample"
    assert by[ids[3], "complex"]["answer"] is None
    assert (
        "'maybe' at line 6 of preds.jsonl is neither 'real' nor 'fake'"
        in (by[ids[3], "complex"]["parse_error"])
    )
    assert {r["backend"] for r in mine} == {"file"}


def test_csv_predictions_and_their_problem_classes(tmp_path):
    path = tmp_path / "p.csv"
    path.write_bytes(
        b"sample_id,answer,explanation,simple_explanation\n"
        b"a,fake,Blurred seam.,A soft line.\n"
        b"b,real,,\n"
        b"c,fake,\xff\xfe odd,\n"
        b"a,real,Again.,\n"
        b"z,fake,Nope.,\n"
        b"d,real,Fine.,\n"
    )
    preds, problems = read_predictions(str(path), {"a", "b", "c", "d"})
    assert set(preds) == {"a", "d"}
    assert preds["a"]["simple_explanation"] == "A soft line." and preds["a"]["answer"] == "fake"
    assert "simple_explanation" not in preds["d"]
    assert set(problems) == {"missing_fields", "not_utf8", "duplicate", "unknown_id"}
    assert problems["missing_fields"].startswith("predictions file: 1 line of p.csv lacks")
    assert "'c' at line 4" in problems["not_utf8"]


def test_a_missing_predictions_file_stops_the_build_with_one_sentence(tmp_path):
    dets = [{"name": "mine", "kind": "file", "path": str(tmp_path / "absent.jsonl")}]
    with pytest.raises(BuildFailed, match=r"cannot read the predictions file .*absent\.jsonl"):
        run_local(validate_config(config(tmp_path, detectors=dets)))


# -- propagated variants -------------------------------------------------------------------------


def test_detections_carry_the_propagation_variant_of_their_item(tmp_path, monkeypatch):
    real_answer = respond.DetectorAnswers.answer

    def fails_on_3x(self, stage, cfg, questions, train):
        """The 3x items' images cannot be read (the detector still trains)."""
        bad = {q.item["blob"] for q in questions if q.item["variant"] == "3x"}
        real_get = stage.ctx.store.get_blob

        def get_blob(key):
            if key in bad:
                raise OSError("blob unreadable")
            return real_get(key)

        monkeypatch.setattr(stage.ctx.store, "get_blob", get_blob)
        return real_answer(self, stage, cfg, questions, train)

    monkeypatch.setattr(respond.DetectorAnswers, "answer", fails_on_3x)
    store, stats, _ = run_local(validate_config(config(tmp_path, propagation=[0, 2, 3])))
    assert not stats["detections"].failures
    ev = {e["eval_item_id"]: e for e in items(store)}
    assert {e["variant"] for e in ev.values()} == {"0x", "2x", "3x"}
    got = rows(store, "detections")
    assert len(got) == 2 * len(ev)  # every variant of every item, both tracks
    for r in got:
        assert r["variant"] == ev[r["eval_item_id"]]["variant"]
        # the error rows of the failed 3x items carry their variant too
        assert (r["status"] == "error") == (r["variant"] == "3x")
    clean = [r for r in got if r["variant"] == "0x"]
    assert clean and all("@" not in r["eval_item_id"] for r in clean)
    assert all(r["eval_item_id"].endswith("@2x") for r in got if r["variant"] == "2x")


def test_a_file_prediction_serves_every_variant_of_its_sample(tmp_path):
    d = config(tmp_path, propagation=[0, 1])
    store, _, _ = run_local(validate_config(d))
    ev = items(store)
    sid = ev[0]["sample_id"]
    path = tmp_path / "preds.jsonl"
    path.write_text(json.dumps({"sample_id": sid, "answer": "fake", "explanation": "Seam."}))
    dets = [{"name": "mine", "kind": "file", "path": str(path)}]
    store, _, _ = run_local(validate_config(config(tmp_path, detectors=dets, propagation=[0, 1])))
    mine = [r for r in rows(store, "detections") if r["sample_id"] == sid]
    assert {(r["variant"], r["track"]) for r in mine} == {
        (v, t) for v in ("0x", "1x") for t in ("complex", "simple")
    }
    assert {r["answer"] for r in mine} == {"fake"}
