"""Transient resource errors stay retryable (issue 32, case 1): a disk that fills up inside
``eval_sets`` stops that shard instead of writing terminal error rows, and once space is freed
a plain rerun gives rows identical to an uninterrupted build."""

from __future__ import annotations

import errno

import pytest

from forenset.benchmarks.evaluation.stages.eval_sets import EvalSets
from forenset.config import validate_config
from forenset.errors import resource_exhausted, transient
from forenset.store.run_store import RunStore
from tests.helpers import all_rows, rows, run_local
from tests.reliability.clikit import tiny_config_dict
from tests.reliability.faultyfs import PROTOCOL, FaultyFS, register


@pytest.fixture
def faulty():
    register()
    FaultyFS.reset()
    yield FaultyFS
    FaultyFS.reset()


@pytest.mark.timeout(600)
def test_full_disk_inside_eval_sets_heals_on_a_plain_rerun(tmp_path, faulty, monkeypatch):
    def cfg_at(run):
        d = tiny_config_dict(run)
        d["evaluation"] = {**d["evaluation"], "propagation": [0, 1],
                           "perturbations": {"families": ["blur"], "severities": [0.5]}}  # fmt: skip
        return validate_config(d)

    ref_store, ref_stats, _ = run_local(cfg_at(tmp_path / "ref"))  # uninterrupted
    assert not any(s.failures for s in ref_stats.values())
    ref = all_rows(ref_store)
    assert sum(r["variant"] != "0x" for r in ref["eval_sets"]) >= 4  # perturbed and propagated
    root = tmp_path / "run"
    uri = f"{PROTOCOL}://{root}"
    cfg = cfg_at(uri)
    real = EvalSets.process
    hit: list[str] = []

    def on_a_full_disk(self, batch, shard=None):
        """The disk is full while eval_sets computes (its image writes fail with ENOSPC) and
        freed before the shard itself is committed."""
        faulty.configure(budget=0)
        try:
            return real(self, batch, shard)
        finally:
            hit.extend(faulty.refused)
            faulty.configure(budget=None)

    monkeypatch.setattr(EvalSets, "process", on_a_full_disk)
    _, stats, _ = run_local(cfg, uri, workers=1)
    assert hit, "no eval_sets write met the full disk: the test would prove nothing"
    failures = stats["eval_sets"].failures
    assert failures and all("No space left on device" in f for f in failures), failures
    store = RunStore(uri)
    terminal = [
        r for r in rows(store, "eval_sets") if r["status"] == "error" and not r["retryable"]
    ]
    assert not terminal, terminal  # never a terminal row for a full disk

    monkeypatch.setattr(EvalSets, "process", real)  # space freed: the same command heals
    _, stats, executed = run_local(cfg, uri)
    assert not any(s.failures for s in stats.values())
    assert executed["eval_sets"] > 0
    assert all_rows(RunStore(uri)) == ref


def test_errno_classes():
    assert resource_exhausted(OSError(errno.ENOSPC, "full"))
    assert resource_exhausted(OSError(errno.EMFILE, "too many open files"))
    assert not resource_exhausted(OSError(errno.EIO, "io")) and transient(OSError(errno.EIO, "io"))
    assert transient(TimeoutError()) and not transient(OSError(errno.ENOENT, "missing"))
    try:
        try:
            raise OSError(errno.ENOSPC, "full")
        except OSError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as wrapped:
        assert resource_exhausted(wrapped)  # found through the cause chain
