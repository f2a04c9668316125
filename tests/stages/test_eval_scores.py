"""eval_scores: Table 5 from a detections table built here (the detections stage is elsewhere).

The detections, explanations and eval_sets shards are written through RunStore.write_shard,
then the stage is planned and run as the worker runs it. Expected numbers are computed by hand
from the constructed answers and texts (module docstring of forenset.benchmarks.evaluation.stages.eval_scores).
"""

from __future__ import annotations

import base64

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from forenset.benchmarks.common.scoring.detection import NO_FAKES
from forenset.benchmarks.common.scoring.intervals import NO_REALS
from forenset.benchmarks.common.scoring.pivot import wide_rows
from forenset.benchmarks.evaluation.schemas.detections import SCHEMA as DETECTIONS
from forenset.benchmarks.evaluation.schemas.eval_scores import GROUP_FIELDS
from forenset.benchmarks.evaluation.schemas.eval_sets import SCHEMA as EVAL_SETS
from forenset.benchmarks.evaluation.stages.eval_scores import EvalScores
from forenset.cli import app
from forenset.config import validate_config
from forenset.schemas.explanations import SCHEMA as EXPLANATIONS
from forenset.store.run_store import RunStore
from forenset.tasks.base import StageContext
from forenset.worker import execute_shard
from tests.conftest import small_config_dict
from tests.helpers import agreeing_evaluator
from tests.scorers.scorer_kit import save_encoder, save_regressor

T_HAND_SIGN = "The hand looks blurry and the sign text is warped."
T_HAND = "The hand is blurry."
T_SHADOW = "The shadow of the cyclist is inconsistent with the light."
T_WALL = "The wall texture looks sharp and the window reflection is natural."
T_SIMPLE = "The hand looks blurry."
T_SIMPLE_SIGN = "The sign text is warped."

# (eval_set, sample, label, generator, family, answer, complex expl, simple expl)
ITEMS = [
    ("id", "f1", "fake", "gen-a", "fam-a", "fake", T_HAND_SIGN, T_SIMPLE),  # TP, refs equal
    ("id", "f2", "fake", "gen-a", "fam-a", "real", None, None),  # FN, no explanation
    ("id", "f3", "fake", "gen-b", "fam-b", None, T_HAND, T_HAND),  # unparseable: FN
    ("id", "f4", "fake", "gen-b", "fam-b", "fake", T_HAND, T_HAND),  # TP, no reference
    ("id", "r1", "real", None, None, "real", T_WALL, T_WALL),  # TN, ref equal
    ("id", "r2", "real", None, None, "fake", T_SHADOW, T_SHADOW),  # FP
    ("id", "r3", "real", None, None, None, None, None),  # unparseable: FP
    ("ood", "g1", "fake", "gen-c", "fam-c", "real", T_HAND, T_HAND),  # FN
    ("ood", "r4", "real", None, None, "real", T_WALL, T_WALL),  # TN
]
# the dataset's reference explanations (f4 has none)
REFS = {
    "f1": {"complex": T_HAND_SIGN, "simple": T_SIMPLE},
    "f2": {"complex": T_HAND_SIGN, "simple": T_SIMPLE},
    "f3": {"complex": T_HAND_SIGN, "simple": T_SIMPLE_SIGN},
    "r1": {"authenticity": T_WALL},
    "r2": {"authenticity": T_WALL},
    "r3": {"authenticity": T_WALL},
    "g1": {"complex": T_SHADOW, "simple": T_SIMPLE},
    "r4": {"authenticity": T_WALL},
}


def _trace(**extra):
    return {"status": "ok", "backend": "test", "stage_version": "1", **extra}


def _write(store: RunStore, stage: str, shard_id: str, rows, schema, partition=None):
    table = pa.Table.from_pylist([{n: r.get(n) for n in schema.names} for r in rows], schema=schema)
    info = store.write_shard(
        stage, shard_id, table, fingerprint=f"fp-{stage}-{shard_id}", partition=partition
    )
    return info


def with_variants(propagated, perturbed=()):
    """ITEMS as (eval_item_id, variant, item) with the propagated copies ``(sample, level,
    answer)`` of ``propagated`` and the perturbed copies ``(sample, family, severity, answer)``
    of ``perturbed`` after them (same truth and texts, their own answer)."""
    by_id = {it[1]: it for it in ITEMS}
    out = [(f"{it[0]}/{it[1]}", "0x", it) for it in ITEMS]
    for sid, level, answer in propagated:
        it = by_id[sid]
        out.append((f"{it[0]}/{sid}@{level}x", f"{level}x", (*it[:5], answer, *it[6:])))
    for sid, family, sev, answer in perturbed:
        it = by_id[sid]
        v = f"{family}:{sev:g}"
        out.append((f"{it[0]}/{sid}@{v}", v, (*it[:5], answer, *it[6:])))
    return out


def build_inputs(store: RunStore, detectors=("d1",), propagated=(), perturbed=()):
    infos = []
    items = with_variants(propagated, perturbed)
    for s in ("id", "ood"):
        rows = [
            _trace(
                eval_item_id=iid, eval_set=es, sample_id=sid, label=label, generator=gen,
                generator_family=fam, holdout=es == "ood", split="test", variant=variant,
                propagation=int(variant[0]) if variant.endswith("x") else 0,
                perturbation_family=None if variant.endswith("x") else variant.split(":")[0],
                severity=None if variant.endswith("x") else float(variant.split(":")[1]),
            )
            for iid, variant, (es, sid, label, gen, fam, *_) in items
            if es == s
        ]  # fmt: skip
        infos.append(_write(store, "eval_sets", s, rows, EVAL_SETS, {"eval_set": s}))
    refs = [
        _trace(
            explanation_id=f"{sid}-{kind}", sample_id=sid, kind=kind, text=text,
            label="real" if kind == "authenticity" else "fake", split="test",
        )
        for sid, kinds in REFS.items()
        for kind, text in kinds.items()
    ]  # fmt: skip
    infos.append(_write(store, "explanations", "s0", refs, EXPLANATIONS))
    dets = []
    for det in detectors:
        for track in ("complex", "simple"):
            for iid, variant, (es, sid, label, _g, _f, answer, cx, sx) in items:
                dets.append(
                    _trace(
                        detection_id=f"{det}/{track}/{iid}", detector=det, track=track,
                        eval_item_id=iid, eval_set=es, sample_id=sid, label=label, variant=variant,
                        answer=answer, explanation=cx if track == "complex" else sx,
                        parse_error=None if answer else "no <answer> tag",
                    )
                )  # fmt: skip
    # one error row: a failed call is not an item
    dets.append(
        {**dets[0], "detection_id": "d1/complex/id/x", "status": "error", "error": "HTTP 500"}
    )
    infos.append(_write(store, "detections", "d0", dets, DETECTIONS))
    return infos


def write_gold(store: RunStore, gold, shard_id="import-a"):
    """A gold_references shard as forenset import-gold writes it: (sample, annotator, text)."""
    from forenset.benchmarks.evaluation.schemas.gold_references import SCHEMA as GOLD

    rows = [
        {"gold_id": f"{sid}-{a}", "sample_id": sid, "annotator": a, "text": t, "status": "ok"}
        for sid, a, t in gold
    ]
    rows.append({"gold_id": "bad", "sample_id": "f2", "annotator": "a", "status": "error"})
    info = _write(store, "gold_references", shard_id, rows, GOLD)
    store.write_manifest("gold_references", [info])


# every value shown (the sets here are a few items), intervals on few resamples
SMALL = {"min_n": 1, "resamples": 200}


def run_stage(
    tmp_path, scorers=None, enabled=True, propagated=(), perturbed=(), gold=None, intervals=SMALL
):
    """Build eval_scores; ``out`` holds its long rows pivoted back to one wide row per group
    (``wide_rows``: ``<metric>``, ``<metric>_reason`` / ``_model`` / ``_n`` / ``_caveat`` ...)."""
    evaluation = {"enabled": enabled, "fakes": 4, "reals": 2, "scorers": scorers or {}}
    cfg = validate_config(
        small_config_dict(tmp_path / "run", evaluation={**evaluation, "intervals": intervals})
    )
    store = RunStore(str(tmp_path / "run"))
    if gold is not None:
        write_gold(store, gold)
    stage = EvalScores(StageContext(store, cfg))
    specs = stage.plan_gathered(build_inputs(store, propagated=propagated, perturbed=perturbed))
    done = [execute_shard(stage, s) for s in specs]
    schema = base64.b64encode(stage.output_schema.serialize().to_pybytes()).decode()
    store.write_manifest("eval_scores", done, {"schema": schema})
    long = [r for info in done for r in store.read_shard(info).to_pylist()]
    assert len({r["score_id"] for r in long}) == len(long)
    return store, stage, specs, wide_rows(long, GROUP_FIELDS)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    enc = save_encoder(tmp_path_factory.mktemp("enc"))
    sle = save_regressor(tmp_path_factory.mktemp("sle"), bias=1.5)  # raw 1.5 -> (1.5+1)/5
    return str(enc), str(sle)


def test_detection_f1_and_accuracy_by_hand(tmp_path):
    _, _, specs, out = run_stage(tmp_path)
    assert [s.partition for s in specs] == [{"eval_set": "id"}, {"eval_set": "ood"}]
    for track in ("complex", "simple"):
        a = out[f"d1/{track}/id/all=all"]
        # TP f1 f4; FN f2 f3 (unparseable); FP r2 r3 (unparseable); TN r1
        assert (a["tp"], a["fn"], a["fp"], a["tn"], a["n"], a["n_unparsed"]) == (2, 2, 2, 1, 7, 2)
        assert a["f1"] == pytest.approx(2 * 2 / (2 * 2 + 2 + 2))  # 0.5
        assert a["accuracy"] == pytest.approx(3 / 7)
        assert a["f1_model"].startswith("scikit-learn-") and a["f1_backend"] == "offline"
        for m in ("f1", "accuracy"):  # seeded bootstrap interval around the value
            assert a[f"{m}_ci_low"] <= a[m] <= a[f"{m}_ci_high"] and a[f"{m}_caveat"] is None
        ga = out[f"d1/{track}/id/generator=gen-a"]  # TP, FN
        assert ga["f1"] == pytest.approx(2 / 3) and ga["accuracy"] == pytest.approx(0.5)
        gb = out[f"d1/{track}/id/generator_family=fam-b"]  # FN (unparseable), TP
        assert gb["f1"] == pytest.approx(2 / 3) and gb["n_unparsed"] == 1
        assert ga["f1_caveat"] == NO_REALS  # a generator's fakes only: not a detection score
        real = out[f"d1/{track}/id/generator=real"]  # TN, FP, FP: no F1 of the fake class
        assert real["f1"] is None and real["f1_reason"] == NO_FAKES
        assert real["accuracy"] == pytest.approx(1 / 3)
        ood = out[f"d1/{track}/ood/all=all"]  # FN, TN
        assert ood["f1"] == 0.0 and ood["accuracy"] == pytest.approx(0.5)
    kinds = {(r["group_kind"], r["group"]) for r in out.values() if r["eval_set"] == "id"}
    assert kinds == {
        ("all", "all"),
        *(("generator", g) for g in ("gen-a", "gen-b", "real")),
        *(("generator_family", g) for g in ("fam-a", "fam-b", "real")),
        ("variant", "0x"),
    }


def test_scores_per_propagation_variant_by_hand(tmp_path):
    # 1x copies of f1 (now missed: FN), f4 (still found: TP) and r1 (now called fake: FP)
    propagated = [("f1", 1, "real"), ("f4", 1, "fake"), ("r1", 1, "fake"), ("g1", 2, "fake")]
    _, _, _, out = run_stage(tmp_path, propagated=propagated)
    for track in ("complex", "simple"):
        clean = out[f"d1/{track}/id/variant=0x"]  # the id set's clean items: as all=all before
        assert (clean["tp"], clean["fn"], clean["fp"], clean["tn"]) == (2, 2, 2, 1)
        assert clean["f1"] == pytest.approx(0.5) and clean["accuracy"] == pytest.approx(3 / 7)
        one = out[f"d1/{track}/id/variant=1x"]  # TP f4, FN f1, FP r1
        assert (one["tp"], one["fn"], one["fp"], one["tn"], one["n"]) == (1, 1, 1, 0, 3)
        assert one["f1"] == pytest.approx(2 * 1 / (2 * 1 + 1 + 1))  # 0.5
        assert one["accuracy"] == pytest.approx(1 / 3)
        two = out[f"d1/{track}/ood/variant=2x"]  # TP g1: F1 1
        assert two["f1"] == pytest.approx(1.0) and two["accuracy"] == 1.0
        # Table 5's cells stay clean: propagated copies are scored in their variant group only
        assert out[f"d1/{track}/id/all=all"]["n"] == 7
        assert out[f"d1/{track}/id/all=all"]["f1"] == pytest.approx(clean["f1"])
        assert out[f"d1/{track}/id/generator=gen-a"]["n"] == 2  # f1, f2 (not f1@1x)
    assert "d1/complex/id/variant=2x" not in out


def test_scores_per_perturbation_family_and_severity_by_hand(tmp_path):
    perturbed = [
        ("f1", "noise", 0.2, "fake"),  # TP
        ("f1", "noise", 0.8, "real"),  # FN: missed under strong noise
        ("r1", "noise", 0.2, "real"),  # TN
        ("r1", "noise", 0.8, "fake"),  # FP
        ("f4", "blur", 0.8, None),  # unparseable: FN
        ("r2", "blur", 0.8, "real"),  # TN
        ("g1", "noise", 0.8, "fake"),  # ood: TP
    ]
    propagated = [("f1", 1, "real")]
    _, _, _, out = run_stage(tmp_path, propagated=propagated, perturbed=perturbed)
    for track in ("complex", "simple"):
        noise = out[f"d1/{track}/id/perturbation=noise"]  # TP, FN, TN, FP
        assert (noise["tp"], noise["fn"], noise["fp"], noise["tn"]) == (1, 1, 1, 1)
        assert noise["f1"] == pytest.approx(0.5) and noise["accuracy"] == pytest.approx(0.5)
        low = out[f"d1/{track}/id/perturbation_severity=noise:0.2"]  # TP, TN
        assert (low["n"], low["f1"], low["accuracy"]) == (2, 1.0, 1.0)
        high = out[f"d1/{track}/id/perturbation_severity=noise:0.8"]  # FN, FP
        assert (high["n"], high["f1"], high["accuracy"]) == (2, 0.0, 0.0)
        blur = out[f"d1/{track}/id/perturbation=blur"]  # FN (unparseable), TN
        assert (blur["n_unparsed"], blur["f1"], blur["accuracy"]) == (1, 0.0, 0.5)
        sev = out[f"d1/{track}/id/severity=0.8"]  # noise FN, FP + blur FN, TN
        assert (sev["tp"], sev["fn"], sev["fp"], sev["tn"]) == (0, 2, 1, 1)
        assert sev["accuracy"] == pytest.approx(0.25)
        assert out[f"d1/{track}/id/severity=0.2"]["n"] == 2
        ood = out[f"d1/{track}/ood/perturbation_severity=noise:0.8"]
        assert (ood["n"], ood["f1"]) == (1, 1.0)
        # perturbed copies stay out of Table 5 and out of the propagation groups
        assert out[f"d1/{track}/id/all=all"]["n"] == 7
        assert out[f"d1/{track}/id/generator=gen-a"]["n"] == 2
        assert out[f"d1/{track}/id/variant=0x"]["n"] == 7
        assert out[f"d1/{track}/id/variant=1x"]["n"] == 1
    kinds = {r["group_kind"] for r in out.values()}
    assert {"perturbation", "perturbation_severity", "severity"} <= kinds
    assert not any(
        r["group"].startswith("noise") for r in out.values() if r["group_kind"] == "variant"
    )


def test_entity_evidence_offline_and_unconfigured_models_are_null(tmp_path):
    _, _, _, out = run_stage(tmp_path)
    a = out["d1/complex/id/all=all"]
    assert (a["entity_score_n"], a["n_no_reference"]) == (6, 1)  # f4 has no reference
    # per item: f1 1 (same text), f2 0 (no explanation), f3 2/3 (hand of hand+sign: P 1, R 1/2),
    # r1 1 (same authenticity text), r2 0 (other entities), r3 0 (none)
    for m in ("entity_score", "evidence_score"):
        assert a[m] == pytest.approx((1 + 0 + 2 / 3 + 1 + 0 + 0) / 6)
        assert a[f"{m}_model"] == "phrase-match-v1" and a[f"{m}_backend"] == "offline"
        assert a[f"{m}_reason"] is None
        assert out["d1/complex/id/generator=gen-a"][m] == pytest.approx(0.5)
        assert out["d1/complex/id/generator=gen-b"][m] == pytest.approx(2 / 3)
        assert out["d1/complex/id/generator=real"][m] == pytest.approx(1 / 3)
        simple = out["d1/simple/id/all=all"]
        assert m not in simple  # not a metric of the simple track: no row
    for sid, r in out.items():
        assert r["bertscore_f1"] is None
        assert r["bertscore_f1_reason"] == "no BERTScore model configured", sid
        assert r.get("sle") is None and r.get("sle_reason") in ("no SLE model configured", None)
    assert out["d1/simple/id/all=all"]["sle_reason"] == "no SLE model configured"


def test_bertscore_and_sle_with_local_models(tmp_path, models):
    from forenset.benchmarks.common.scorers.bertscore import BertScorer

    enc, sle = models
    _, _, _, out = run_stage(tmp_path, {"bertscore_model": enc, "sle_model": sle})
    for track in ("complex", "simple"):
        ga = out[f"d1/{track}/id/generator=gen-a"]  # f1: same text as its reference; f2: none
        assert ga["bertscore_f1"] == pytest.approx(0.5, abs=1e-5)
        assert ga["bertscore_f1_model"] == enc and ga["bertscore_f1_backend"] == "transformers"
        assert ga["bertscore_f1_reason"] is None
    # the whole set: the mean of BertScorer's item scores (items with a reference)
    pairs = [
        (cx or "", REFS[sid]["complex" if label == "fake" else "authenticity"])
        for es, sid, label, *_x, cx, _sx in ITEMS
        if es == "id" and sid in REFS
    ]
    want = [s.value for s in BertScorer(enc).score(*zip(*pairs, strict=True))]
    assert out["d1/complex/id/all=all"]["bertscore_f1"] == pytest.approx(sum(want) / len(want))
    # SLE: raw 1.5 -> 0.5 for every text; no explanation earns 0
    s = out["d1/simple/id/all=all"]
    assert s["sle"] == pytest.approx((0.5 + 0 + 0.5 + 0.5 + 0.5 + 0) / 6)
    assert s["sle_model"] == sle and s["sle_reason"] is None
    assert out["d1/simple/id/generator=gen-a"]["sle"] == pytest.approx(0.25)
    assert "sle" not in out["d1/complex/id/all=all"]


def test_planning_and_fingerprint_scope(tmp_path, models):
    *_, specs, _ = run_stage(tmp_path / "off", enabled=False)
    assert specs == []
    _, stage, specs, _ = run_stage(tmp_path / "a")
    _, _, specs_b, _ = run_stage(tmp_path / "b", {"bertscore_model": models[0]})
    assert specs[0].fingerprint != specs_b[0].fingerprint  # a scorer setting recomputes
    assert stage.stage_config() == {
        "scorers": {
            "evaluator": None, "bertscore_model": None, "sle_model": None,
            "references": "dataset",
        },
        "intervals": {"resamples": 200, "level": 0.95, "seed": None, "min_n": 1},
    }  # fmt: skip
    _, _, specs_c, _ = run_stage(tmp_path / "c", intervals={**SMALL, "resamples": 300})
    assert specs[0].fingerprint != specs_c[0].fingerprint  # an interval setting recomputes
    assert {i.stage for i in specs[0].inputs} == {"detections", "explanations", "eval_sets"}
    assert all(i.partition.get("eval_set", "id") == "id" for i in specs[0].inputs)


def test_cli_prints_table5(tmp_path, models):
    store, *_, out = run_stage(tmp_path, {"sle_model": models[1]})
    res = CliRunner().invoke(app, ["eval", str(tmp_path / "run")], terminal_width=250)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    a = out["d1/complex/id/all=all"]

    def iv(m, pct):
        f = (lambda v: f"{100 * v:.2f}") if pct else (lambda v: f"{v:.3f}")
        return f"{f(a[m])} [{f(a[m + '_ci_low'])}, {f(a[m + '_ci_high'])}]"

    row = next(ln for ln in lines if "d1" in ln and "complex" in ln and " ID " in ln)
    # n 7, F1 50.00, accuracy 3/7, EntityScore 4/9, each with its interval; no BERTScore
    assert " 7 " in row and iv("f1", True) in row and iv("accuracy", True) in row
    assert iv("entity_score", False).startswith("0.444") and iv("entity_score", False) in row
    assert "n=6" in row and "—" in row  # EntityScore on the 6 items with a reference
    row = next(ln for ln in lines if "d1" in ln and "simple" in ln and " ID " in ln)
    assert "0.333 [" in row  # SLE ID
    row = next(ln for ln in lines if "d1" in ln and "complex" in ln and " OOD " in ln)
    assert "0.00 [0.00, 0.00]" in row  # F1 OOD: FN, TN
    text = res.output
    assert "BERTScore-F1: no BERTScore model configured" in text
    assert f"SLE: {models[1]}" in text.replace("\n", "")


def test_cli_flags_small_and_one_class_sets(tmp_path):
    """With the default minimum n (10), Table 5's sets of 7 and 2 items are not results."""
    run_stage(tmp_path, intervals={"resamples": 50})
    res = CliRunner().invoke(app, ["eval", str(tmp_path / "run")], terminal_width=250)
    assert res.exit_code == 0, res.output
    row = next(ln for ln in res.output.splitlines() if "complex" in ln and " ID " in ln)
    assert "not meaningful (n = 7 is below the minimum of 10 items)" in row
    assert "50.00" not in row  # the F1 itself is not printed as a result


def test_cli_without_eval_scores_says_so(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "state.json").write_text("{}")  # a run (a bare folder is refused)
    res = CliRunner().invoke(app, ["eval", str(tmp_path / "run")])
    assert res.exit_code == 2  # an input problem (docs/cli.md, exit codes)
    assert "has no eval_scores" in res.output


@pytest.mark.parametrize("broken", [False, True])
def test_entity_evidence_by_a_model_evaluator(tmp_path, monkeypatch, broken):
    from forenset.backends.llm import reset_limiters, reset_stage
    from forenset.testing.fake_openai import FakeOpenAI, Fault

    monkeypatch.setenv("FAKE_SCORER_KEY", "sk-scorer-test")
    reset_limiters()
    reset_stage("eval_scores", 3)
    with FakeOpenAI() as server:
        if broken:  # every reply unusable (a Fault is what the server sends, not a reply)
            server.fault_for = lambda body: Fault(content="not json")
        else:
            server.reply = agreeing_evaluator
        pool = {
            "backend": "openai",
            "model": "gpt-fake",
            "base_url": server.base_url,
            "api_key_env": "FAKE_SCORER_KEY",
            "timeout_s": 5.0,
        }
        evaluator = {"pool": [pool], "backoff_base_s": 0.01, "backoff_max_s": 0.05}
        evaluator |= {"max_error_rate": 1.0, "repair_retries": 0}
        _, _, _, out = run_stage(tmp_path, {"evaluator": evaluator})
    a = out["d1/complex/id/all=all"]
    for m in ("entity_score", "evidence_score"):
        assert (a[f"{m}_model"], a[f"{m}_backend"]) == ("gpt-fake", "openai")
        if broken:  # every call failed: null with the call's error, never a number
            assert a[m] is None and a[f"{m}_reason"].startswith("extraction failed")
        else:
            assert a[m] == pytest.approx(1.0) and a[f"{m}_reason"] is None


def test_report_shows_table5_and_the_f1_plot(tmp_path, models):
    """The HTML report's evaluation section holds the same cells as `forenset eval`."""
    from forenset.benchmarks.evaluation.report import evaluation_section, table5
    from forenset.store.views import connect

    store, *_ = run_stage(tmp_path, {"sle_model": models[1]})
    con = connect(store, ["eval_scores"])
    section = evaluation_section(store, con)
    t5 = table5(con)
    assert t5 is not None and t5.rows
    for row in t5.rows:
        assert "".join(f"<td>{c}</td>" for c in row) in section
    assert "no BERTScore model configured" in section
    assert "data:image/png;base64," in section  # F1 ID vs OOD bar chart
    assert evaluation_section(RunStore(str(tmp_path / "empty")), con) == ""


PERTURBED = [
    ("f1", "noise", 0.2, "fake"),
    ("f1", "noise", 0.8, "real"),
    ("r1", "noise", 0.2, "real"),
    ("r1", "noise", 0.8, "fake"),
    ("r2", "blur", 0.8, "real"),
    ("f4", "blur", 0.8, "fake"),
]
# 1x: f1 missed (FN), r1 still real (TN); every robustness group holds both classes
PROPAGATED = [("f1", 1, "real"), ("r1", 1, "real")]


def test_robustness_table_and_plot_series_by_hand(tmp_path):
    from forenset.benchmarks.evaluation.report import CLEAN, robustness
    from forenset.store.views import connect

    store, *_ = run_stage(tmp_path, propagated=PROPAGATED, perturbed=PERTURBED)
    rb = robustness(connect(store, ["eval_scores"]))
    assert rb is not None
    # id set: clean 3/7; noise TP TN FN FP = 2/4; blur TN TP = 2/2; 1x FN TN = 1/2
    assert rb.by_family["d1/complex ID"] == pytest.approx(
        {CLEAN: 100 * 3 / 7, "noise": 50.0, "blur": 100.0}
    )
    assert rb.by_level["d1/simple ID"] == pytest.approx({"0x": 100 * 3 / 7, "1x": 50.0})
    assert "d1/complex OOD" not in rb.by_family or len(rb.by_family["d1/complex OOD"]) == 1
    assert rb.headers == [
        "detector", "track", "set", "group kind", "group", "n", "accuracy %", "F1 %",
    ]  # fmt: skip
    # FN + FP: every resample scores 0 (resamples without a fake have no F1 and are left out)
    row = ["d1", "complex", "ID", "perturbation_severity", "noise:0.8", "2"]
    assert [*row, "0.00 [0.00, 0.00]", "0.00 [0.00, 0.00]"] in rb.rows
    _, _, _, clean_only = run_stage(tmp_path / "clean")
    assert robustness(connect(RunStore(str(tmp_path / "clean" / "run")), ["eval_scores"])) is None


def test_cli_and_report_show_the_robustness_groups(tmp_path):
    from forenset.benchmarks.evaluation.report import evaluation_section
    from forenset.store.views import connect

    store, *_ = run_stage(tmp_path, propagated=PROPAGATED, perturbed=PERTURBED)
    res = CliRunner().invoke(app, ["eval", str(tmp_path / "run")], terminal_width=220)
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if "noise:0.2" in ln and "complex" in ln)
    assert "100.00" in line  # TP + TN
    section = evaluation_section(store, connect(store, ["eval_scores"]))
    assert 'alt="accuracy per perturbation family"' in section
    assert 'alt="accuracy per propagation level"' in section
    assert "<td>noise:0.8</td>" in section


GOLD = [
    ("f1", "b", T_HAND),  # f1: annotator a comes first by name
    ("f1", "a", T_HAND_SIGN),  # = f1's complex explanation: 1
    ("f3", "a", T_SHADOW),  # f3 explains T_HAND: 0
    ("r1", "a", T_WALL),  # not a fake: still only fakes' complex track is scored
]


def test_gold_references_replace_the_dataset_references(tmp_path):
    store, stage, specs, out = run_stage(tmp_path, {"references": "gold"}, gold=GOLD)
    assert "gold_references" in {i.stage for i in specs[0].inputs}
    a = out["d1/complex/id/all=all"]
    # scored against gold: f1 (1) and f3 (0); f2, f4 and the reals have no gold reference
    assert (a["entity_score_n"], a["n_no_reference"]) == (2, 5)
    assert a["entity_score"] == pytest.approx(0.5) and a["evidence_score"] == pytest.approx(0.5)
    s = out["d1/simple/id/all=all"]
    assert s["bertscore_f1"] is None and s["n_no_reference"] == 7
    assert a["f1"] == pytest.approx(0.5)  # detection scores do not depend on references
    # a new gold import changes the scores' fingerprint (recomputed on the next build)
    write_gold(store, GOLD[:2], shard_id="import-b")
    again = stage.plan_gathered(build_inputs(RunStore(str(tmp_path / "x"))))
    assert again[0].fingerprint != specs[0].fingerprint


def test_gold_references_ignored_unless_asked(tmp_path):
    _, _, specs, out = run_stage(tmp_path, gold=GOLD)
    assert "gold_references" not in {i.stage for i in specs[0].inputs}
    assert out["d1/complex/id/all=all"]["entity_score_n"] == 6  # the dataset's references


def test_cli_prints_the_gold_agreement(tmp_path):
    run_stage(tmp_path, {"references": "gold"}, gold=GOLD)
    res = CliRunner().invoke(app, ["eval", str(tmp_path / "run")], terminal_width=250)
    assert res.exit_code == 0, res.output
    # f1 is the only sample with two annotators: (T_HAND, T_HAND_SIGN) -> P 1, R 1/2 -> 2/3
    assert (
        "inter-annotator agreement (gold references, 1 images, 1 pairs): EntityScore 0.67, "
        "EvidenceScore 0.67 [phrase-match-v1]; paper: 0.50 / 0.44"
    ) in " ".join(res.output.split())
