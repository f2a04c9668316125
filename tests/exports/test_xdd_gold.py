"""The XDD challenge's reference read the other way (issue 39.1): a reference JSONL as a run's
gold, a submission zip as a ``kind: file`` detector, and ``forenset eval`` scoring them as
``forenset xdd-score`` (checked against the organisers' program in test_xdd.py) does."""

from __future__ import annotations

import json
import shutil
import zipfile

import pytest
from typer.testing import CliRunner

from forenset.benchmarks.xdd import format as xf
from forenset.benchmarks.xdd.gold import xdd_gold_rows
from forenset.cli import app
from forenset.exports.cli import app as exports_app
from tests.exports.test_xdd import run_official, scorer_program


def test_bad_records_are_error_rows_with_one_sentence_each():
    labels = {"s1": "fake", "s2": "real", "s3": "fake", "s4": "fake", "s5": "real"}
    good = {"label": 1, "complex_reference": "c", "simple_reference": "s",
            "score_explanations": True}  # fmt: skip
    lines = [
        json.dumps({"id": "id/s1", **good}),
        json.dumps(
            {
                "id": "s2",
                "label": 0,
                "complex_reference": "real c",
                "simple_reference": "real s",
                "score_explanations": True,
            }
        ),  # fmt: skip
        json.dumps({"id": "ood/s3", "label": 1, "score_explanations": False}),
        "[1, 2]",
        "{not json",
        json.dumps({"id": "s4", **good, "label": True}),
        json.dumps({"id": "s4", **good, "score_explanations": "yes"}),
        json.dumps({"id": "nope", **good}),
        json.dumps({"id": "s5", **good}),  # s5 is real in the run
        json.dumps({"id": "ood/s1", **good}),  # s1 again, by another id
        json.dumps({"id": "s4", **good, "simple_reference": "  "}),
    ]
    rows = xdd_gold_rows("\n".join(lines) + "\n\n", labels, "h")
    ok = [r for r in rows if r["status"] == "ok"]
    assert {(r["sample_id"], r.get("kind"), r.get("text")) for r in ok} == {
        ("s1", "complex", "c"), ("s1", "simple", "s"), ("s2", "complex", "real c"),
        ("s2", "simple", "real s"), ("s3", None, None),
    }  # fmt: skip
    assert {r["label"] for r in ok if r["sample_id"] == "s2"} == {"real"}
    bad = [r for r in rows if r["status"] == "error"]
    assert Counter_of(bad) == {"not_an_object": 2, "wrong_type": 2, "unknown_sample": 1,
                               "label_mismatch": 1, "duplicate": 1, "empty_reference": 1}  # fmt: skip
    assert all(r["error"].endswith(".") and "\n" not in r["error"] for r in bad)


def Counter_of(rows):
    from collections import Counter

    return dict(Counter(r["problem"] for r in rows))


def _split(refs, sub, eval_set, tmp):
    """The reference and the submission restricted to one eval set (``<set>/`` ids), to score
    beside ``eval_scores``' ``all`` group of that set."""
    tmp.mkdir(exist_ok=True)
    ids = {r["id"] for r in refs if r["id"].startswith(eval_set + "/")}
    ref = tmp / f"ref-{eval_set}.jsonl"
    ref.write_text(xf.dumps_jsonl(r for r in refs if r["id"] in ids), encoding="utf-8")
    z = tmp / f"sub-{eval_set}.zip"
    z.write_bytes(xf.submission_zip(
        [{"id": i, "pred_label": v} for i, v in sorted(sub.detection.items()) if i in ids],
        [{"id": i, "complex_explanation": v} for i, v in sorted(sub.complex.items()) if i in ids],
        [{"id": i, "simple_explanation": v} for i, v in sorted(sub.simple.items()) if i in ids],
    ))  # fmt: skip
    return ref, z, len(ids)


def test_a_reference_as_gold_and_a_zip_as_a_detector_score_as_xdd_score(built, tmp_path):
    from forenset.config import validate_config
    from tests.helpers import rows, run_local
    from tests.realmodels.conftest import minilm_dir

    store, cfg = built
    out = tmp_path / "xdd"
    res = CliRunner().invoke(exports_app, ["export", store.uri, "--format", "xdd", "--out",
                                           str(out), "--detector", "forensic"])  # fmt: skip
    assert res.exit_code == 0, res.output
    # the gold must be what is scored, not the run's own explanations: every reference text is
    # changed before the import, so agreeing numbers can only come from the imported file
    refs = xf.read_reference(out / "reference.jsonl")
    for r in refs:
        if r["score_explanations"]:
            r["complex_reference"] += " The shadows also fall the wrong way."
            r["simple_reference"] = "Look again: " + r["simple_reference"]
    ref = tmp_path / "reference.jsonl"
    ref.write_text(xf.dumps_jsonl(refs), encoding="utf-8")
    # a fresh run: a copy of the build without the export's detector, its explanations unused
    run = tmp_path / "run"
    shutil.copytree(store.uri, run)
    got = CliRunner().invoke(app, ["xdd-import-gold", str(run), str(ref)])
    assert got.exit_code == 0, got.output
    info = json.loads(got.output)
    scored = sum(r["score_explanations"] for r in refs)
    assert info["counts"] == {"ok": len(refs) + scored, "error": 0} and not info["problems"]
    minilm = minilm_dir()
    # a partial submission too: an id with no row at all, one with no label, one with no
    # complex text, one with no simple text (the scorer counts each through its coverage)
    sub = xf.read_submission(out / "forensic.zip", refs)
    ids = sorted(r["id"] for r in refs if r["score_explanations"])
    assert len(ids) >= 4
    partial = tmp_path / "partial.zip"
    partial.write_bytes(xf.submission_zip(
        [{"id": i, "pred_label": v} for i, v in sorted(sub.detection.items()) if i not in ids[:2]],
        [{"id": i, "complex_explanation": v} for i, v in sorted(sub.complex.items())
         if i not in (ids[0], ids[2])],
        [{"id": i, "simple_explanation": v} for i, v in sorted(sub.simple.items())
         if i not in (ids[0], ids[3])],
    ))  # fmt: skip
    data = cfg.model_dump(mode="json", exclude_unset=True)
    data["run_dir"] = str(run)
    ev = data.setdefault("evaluation", {})
    ev["detectors"] = [{"name": "from-xdd", "kind": "file", "path": str(out / "forensic.zip")},
                       {"name": "partial", "kind": "file", "path": str(partial)}]  # fmt: skip
    ev["scorers"] = {"references": "gold", "bertscore_model": str(minilm) if minilm else None}
    ev["intervals"] = {"resamples": 0}
    st, stats, _ = run_local(validate_config(data))
    assert not any(s.failed for s in stats.values()), {
        k: s.failures for k, s in stats.items() if s.failed
    }
    scored_rows = [r for r in rows(st, "eval_scores") if r["status"] == "ok"
                   and r["group_kind"] == "all"]  # fmt: skip
    scores = [r for r in scored_rows if r["detector"] == "from-xdd"]
    assert scores
    val = {(r["eval_set"], r["track"], r["metric"]): r for r in scores}
    assert not [r for r in rows(st, "detections") if r["status"] == "error"]
    program = None
    for eval_set in sorted({k[0] for k in val}):
        sref, szip, n = _split(refs, sub, eval_set, tmp_path)
        assert n and len([i for i in sub.detection if i.startswith(eval_set + "/")]) == n
        dest = tmp_path / f"scores-{eval_set}"
        args = ["xdd-score", str(sref), str(szip), "--resamples", "0", "--out", str(dest)]
        res = CliRunner().invoke(app, args + (["--bertscore-model", str(minilm), "--sle-stand-in"]
                                              if minilm else []))  # fmt: skip
        assert res.exit_code == 0, res.output
        xdd = {r["key"]: r for r in json.loads((dest / "scores_detail.json").read_text())}
        # detection: full coverage here, so the leaderboard's keys are eval's, exactly
        for track in ("complex", "simple"):
            assert val[(eval_set, track, "accuracy")]["value"] == xdd["detection_accuracy"]["value"]
            f1 = val[(eval_set, track, "f1")]["value"]
            assert f1 == pytest.approx(xdd["detection_fake_f1"]["value"], abs=1e-12), eval_set
            assert val[(eval_set, track, "accuracy")]["n"] == xdd["detection_accuracy"]["n"] == n
        if minilm is None:
            continue
        # explanations: the same BERTScore on the same (gold) references and texts
        cb, sb = (
            val[(eval_set, "complex", "bertscore_f1")],
            val[(eval_set, "simple", "bertscore_f1")],
        )
        assert cb["value"] == pytest.approx(xdd["complex_bert_f1"]["value"], abs=1e-6)
        assert sb["value"] == pytest.approx(xdd["simple_bert_f1"]["value"], abs=1e-6)
        assert cb["n"] == xdd["complex_bert_f1"]["n"]
        # the validation key is 0.3 BERTScore + 0.4 EntityScore + 0.3 EvidenceScore, both
        # scorers' EntityScore / EvidenceScore the offline phrase matcher
        ent, evi = (
            val[(eval_set, "complex", m)]["value"] for m in ("entity_score", "evidence_score")
        )
        want = 0.3 * cb["value"] + 0.4 * ent + 0.3 * evi
        assert xdd["validation_complex_score"]["value"] == pytest.approx(want, abs=1e-6)
        # and the organisers' program on the same files agrees with xdd-score (its own test
        # checks every key; here: on the modified reference, detection and BERTScore keys)
        try:
            program = program or scorer_program(tmp_path)
        except pytest.skip.Exception:
            continue
        official = run_official(program, sref, szip, tmp_path / f"official-{eval_set}", minilm)
        for key in ("detection_accuracy", "detection_fake_f1", "complex_bert_f1",
                    "simple_bert_f1"):  # fmt: skip
            assert official[key] == pytest.approx(xdd[key]["value"], abs=1e-6), key
    # the partial submission: accuracy and the explanation scores still agree (a missing row is
    # a wrong answer and no text in both); F1 does not (the leaderboard multiplies the F1 of
    # the predicted rows by coverage, eval_scores counts a missing answer in the confusion)
    part = {(r["eval_set"], r["track"], r["metric"]): r for r in scored_rows
            if r["detector"] == "partial"}  # fmt: skip
    psub = xf.read_submission(partial, refs)
    for eval_set in sorted({k[0] for k in part}):
        sref, szip, n = _split(refs, psub, eval_set, tmp_path / "p")
        dest = tmp_path / f"partial-{eval_set}"
        args = ["xdd-score", str(sref), str(szip), "--resamples", "0", "--out", str(dest)]
        res = CliRunner().invoke(app, args + (["--bertscore-model", str(minilm)] if minilm else []))
        assert res.exit_code == 0, res.output
        xdd = {r["key"]: r for r in json.loads((dest / "scores_detail.json").read_text())}
        assert len([i for i in psub.detection if i.startswith(eval_set + "/")]) < n
        for track in ("complex", "simple"):
            acc = part[(eval_set, track, "accuracy")]
            assert acc["value"] == pytest.approx(xdd["detection_accuracy"]["value"], abs=1e-12)
            assert acc["n"] == n
        if minilm is not None:
            for track, key in (("complex", "complex_bert_f1"), ("simple", "simple_bert_f1")):
                got = part[(eval_set, track, "bertscore_f1")]["value"]
                assert got == pytest.approx(xdd[key]["value"], abs=1e-6), track
    res = CliRunner().invoke(app, ["eval", str(run)])
    assert res.exit_code == 0, res.output
    assert "from-xdd" in res.output


def test_import_refusals_are_one_sentence(built, tmp_path):
    store, _ = built
    run = tmp_path / "run"
    shutil.copytree(store.uri, run)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    res = CliRunner().invoke(app, ["xdd-import-gold", str(run), str(empty)])
    assert res.exit_code == 2 and "is empty" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(app, ["xdd-import-gold", str(run), str(tmp_path / "missing.jsonl")])
    assert res.exit_code == 2 and "cannot read the reference" in res.output
    z = tmp_path / "not.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("a", "b")
    res = CliRunner().invoke(app, ["xdd-import-gold", str(run), str(z)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    ref = tmp_path / "reference.jsonl"
    ref.write_text('{"id": "x", "label": 1}\n')
    res = CliRunner().invoke(app, ["import-gold", str(run), str(ref)])
    assert res.exit_code == 2 and "forenset xdd-import-gold" in res.output
    # a reference naming no sample of the run: every record an error row, counted
    res = CliRunner().invoke(app, ["xdd-import-gold", str(run), str(ref)])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert info["counts"] == {"ok": 0, "error": 1}
    assert info["problems"] == ["1 record's id names no sample of this run."]


def test_gold_is_looked_up_by_track_and_truth():
    """XDD gold scores both tracks of reals and fakes; Label Studio gold (no kind, no label)
    stays the complex reference of a fake only, as before."""
    from forenset.benchmarks.evaluation.stages.eval_scores import gold_as_references, join_items

    gold = [
        {"sample_id": "r", "annotator": "xdd-reference", "text": "rc", "kind": "complex",
         "label": "real"},
        {"sample_id": "r", "annotator": "xdd-reference", "text": "rs", "kind": "simple",
         "label": "real"},
        {"sample_id": "f", "annotator": "ann", "text": "fc"},  # Label Studio: no kind, no label
        {"sample_id": "r2", "annotator": "ann", "text": "r2c"},  # Label Studio gold of a real
    ]  # fmt: skip
    dets = [
        {"detection_id": f"{s}/{t}", "track": t, "eval_set": "id", "sample_id": s, "label": lab,
         "eval_item_id": f"id/{s}"}
        for s, lab in (("r", "real"), ("f", "fake"), ("r2", "real")) for t in ("complex", "simple")
    ]  # fmt: skip
    t = join_items(dets, gold_as_references(gold), [], eval_set="id", by_track=True)
    refs = {r["detection_id"]: r["reference"] for r in t.to_pylist()}
    assert refs == {"r/complex": "rc", "r/simple": "rs", "f/complex": "fc", "f/simple": None,
                    "r2/complex": None, "r2/simple": None}  # fmt: skip
