"""A rerun with nothing to do is decided before Prefect: the dry walk and the export fingerprint."""

from __future__ import annotations

import os

from forenset.config import validate_config
from forenset.exports.dataset import MARKER, export_dataset, export_up_to_date
from forenset.scheduler import shards_up_to_date
from forenset.tasks.base import StageContext
from tests.conftest import small_config_dict
from tests.helpers import run_local


def _cfg(run, **over):
    d = small_config_dict(run, evaluation={"enabled": False}, **over)
    d["sources"] = dict(d["sources"], samples=["astronaut", "coffee", "chelsea"])
    return validate_config(d)


def _mtimes(store) -> dict[str, int]:
    base = store.path("exports", "parquet")
    return {n: os.stat(os.path.join(base, n)).st_mtime_ns for n in sorted(os.listdir(base))}


def test_noop_walk_export_fingerprint_and_what_breaks_them(tmp_path):
    run = tmp_path / "run"
    cfg = _cfg(run)
    store, stats, _ = run_local(cfg)
    export_dataset(store, cfg.export)
    planned = sum(s.planned for s in stats.values())
    assert planned > 10 and all(s.run == s.planned for s in stats.values() if s.planned)

    # nothing pending: the walk counts every shard, the export is current, nothing is written
    n = shards_up_to_date(StageContext(store, cfg))
    assert n == planned
    assert export_up_to_date(store, cfg.export)
    before = _mtimes(store)
    res = export_dataset(store, cfg.export)
    assert res["skipped"] is True and _mtimes(store) == before
    marker = store.read_json(MARKER)
    assert set(marker["inputs"]) >= {"splits", "explanations", "perturbations"}

    # a fingerprinted change downstream: the walk stops at the first stale shard
    changed = _cfg(run, explanations={"min_words": 13})
    assert shards_up_to_date(StageContext(store, changed)) is None
    _, stats2, executed = run_local(changed)
    assert executed["explanations"] > 0 and not executed["diffs"]
    assert shards_up_to_date(StageContext(store, changed)) == planned
    # explanations changed: the export's input fingerprint differs and it is rewritten
    assert not export_up_to_date(store, changed.export)
    res = export_dataset(store, changed.export)
    assert res["skipped"] is False
    after = store.read_json(MARKER)
    assert after["inputs"]["explanations"] != marker["inputs"]["explanations"]
    assert after["inputs"]["splits"] == marker["inputs"]["splits"]
    assert all(after_t > before[name] for name, after_t in _mtimes(store).items() if name in before)

    # a build that did not end complete (interrupted, failed, another config) is never a no-op
    state = store.read_json("state.json")
    store.write_json("state.json", {**state, "status": "interrupted"})
    assert shards_up_to_date(StageContext(store, changed)) is None
    store.write_json("state.json", state)
    assert shards_up_to_date(StageContext(store, cfg)) is None  # state's config hash differs

    # a shard file gone: the walk finds it missing
    victim = next(i for i in store.manifest("judgments"))
    os.remove(store.path(victim.path))
    assert shards_up_to_date(StageContext(store, changed)) is None


def test_manifest_out_of_step_is_not_a_noop(tmp_path):
    """Every shard valid but a manifest listing something else (a build that died between
    committing shards and writing manifests): the real build must run to rewrite it."""
    cfg = _cfg(tmp_path / "run")
    store, _, _ = run_local(cfg)
    ctx = StageContext(store, cfg)
    assert shards_up_to_date(ctx) is not None
    shards = store.manifest("captions")
    store.write_manifest("captions", shards[:-1])
    assert shards_up_to_date(ctx) is None


def test_source_hashes_are_cached_by_path_size_and_mtime(tmp_path):
    """Planning hashes each photo once; a rerun reuses the hash while the file is unchanged, and
    a rewritten file (new size or mtime) is read and hashed again."""
    import numpy as np
    from PIL import Image

    from forenset.tasks.sources import Sources

    photos = tmp_path / "photos"
    photos.mkdir()
    rng = np.random.default_rng(0)
    for i in range(2):
        Image.fromarray(rng.integers(0, 255, (40, 50, 3), np.uint8)).save(photos / f"p{i}.png")
    d = small_config_dict(tmp_path / "run", evaluation={"enabled": False})
    d["sources"] = {"samples": "none", "folders": [str(photos)], "max_side": 64}
    cfg = validate_config(d)
    from forenset.store.run_store import RunStore

    ctx = StageContext(RunStore(str(tmp_path / "run")), cfg)

    def ids(stage: Sources) -> list[str]:
        return [it["image_id"] for s in stage.plan_sources() for it in s.params["items"]]

    first = ids(Sources(ctx))
    reads: list[str] = []
    stage = Sources(ctx)
    orig = stage.read_item
    stage.read_item = lambda it: reads.append(it["uri"]) or orig(it)
    assert ids(stage) == first and reads == []  # every hash came from the cache
    Image.fromarray(rng.integers(0, 255, (44, 50, 3), np.uint8)).save(photos / "p1.png")
    second = ids(stage)
    assert reads == [str(photos / "p1.png")]
    assert second[0] == first[0] and second[1] != first[1]
