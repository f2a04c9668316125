"""The candidates stage with tiny random-weight diffusers pipelines: edits and text-to-image."""

from forenset.config import load_config
from forenset.flows.local import run_local
from tests.helpers import rows
from tests.text.explanation_facts import build_defects


def test_cpu_diffusers_config_builds_edits_and_t2i(tmp_path):
    cfg = load_config("examples/diffusers-cpu.yaml")
    store, stats, executed = run_local(cfg, str(tmp_path / "run"))
    cands = rows(store, "candidates")
    by_gen = {}
    for r in cands:
        by_gen.setdefault(r["generator"], []).append(r)
    assert set(by_gen) == {"cv-telea", "ip2p-tiny", "kontext-tiny", "flux-tiny"}
    for g in ("ip2p-tiny", "kontext-tiny", "flux-tiny"):
        assert all(r["backend"] == "diffusers" and r["status"] == "ok" for r in by_gen[g]), g
    t2i = by_gen["flux-tiny"]
    assert {r["kind"] for r in t2i} == {"t2i"} and len(t2i) == len(rows(store, "prompts"))
    assert all((r["width"], r["height"]) == (64, 64) for r in t2i)
    edits = by_gen["ip2p-tiny"]
    assert all(r["source_blob"] and (r["width"], r["height"]) != (0, 0) for r in edits)
    # edits go through Edit-Check; text-to-image images go straight to splits
    assert {r["generator"] for r in rows(store, "diffs")} == {
        "cv-telea",
        "ip2p-tiny",
        "kontext-tiny",
    }
    assert "flux-tiny" in {r["generator"] for r in rows(store, "splits")}
    # held-out family only in test
    assert {r["split"] for r in rows(store, "splits") if r["generator"] == "kontext-tiny"} <= {
        "test"
    }
    # the example's explanations (edits and text-to-image fakes, reals) have no defect (issue 38)
    assert build_defects(store) == []
    # a finished build re-runs nothing (the pipelines are not even loaded)
    _, _, again = run_local(cfg, str(tmp_path / "run"))
    assert sum(again.values()) == 0
