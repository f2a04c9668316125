"""Identical candidates of different generators: kept once in splits, both generators recorded."""

from __future__ import annotations

from collections import defaultdict

from forenset.config import validate_config
from forenset.flows.local import run_local
from tests.conftest import small_config_dict
from tests.helpers import rows


def test_identical_bytes_of_two_generators_are_kept_once(tmp_path):
    # cv-telea and cv-ns differ only in inpainting: their lighting and splice edits coincide
    cfg = validate_config(
        small_config_dict(
            tmp_path / "run",
            generators=[
                {"name": "cv-telea", "family": "classical", "inpaint": "telea"},
                {"name": "cv-ns", "family": "classical", "inpaint": "ns"},
            ],
            evaluation={"enabled": False},
            perturbations={"variants": 0},
        )
    )
    store, stats, _ = run_local(cfg)
    assert not any(st.failures for st in stats.values())
    kept = [r for r in rows(store, "verdicts") if r["status"] == "ok" and r["keep"]]
    same = defaultdict(set)
    for r in kept:
        same[(r["image_id"], r["blob"])].add(r["generator"])
    dup_groups = {k: g for k, g in same.items() if len(g) > 1}
    assert dup_groups, "the config must produce identical candidates"
    fakes = [r for r in rows(store, "splits") if r["label"] == "fake"]
    by_bytes = defaultdict(list)
    for r in fakes:
        by_bytes[(r["image_id"], r["blob"])].append(r)
    assert len(fakes) == len(same)  # one splits row per distinct kept image
    for key, gens in same.items():
        (row,) = by_bytes[key]
        assert sorted(row["generators"]) == sorted(gens)
        if len(gens) > 1:
            assert row["generator"] == "cv-ns"  # the first by name keeps the row
        else:
            assert row["generators"] == [row["generator"]]
    assert all(r["generators"] == ["real"] for r in rows(store, "splits") if r["label"] == "real")
    from forenset import stats
    from forenset.stages import table_names
    from forenset.store.views import connect

    _, counted = stats.run(connect(store, table_names()), "duplicate_candidates")
    assert sum(n for _, n in counted) == len(dup_groups)
