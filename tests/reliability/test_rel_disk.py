"""A full disk and a read-only run directory: a clear errno, nothing partial visible, resumable."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from forenset.store.run_store import RunStore
from tests.helpers import all_rows, run_local
from tests.reliability.clikit import reference, tiny_cfg
from tests.reliability.faultyfs import PROTOCOL, FaultyFS, register


@pytest.fixture
def faulty():
    register()
    FaultyFS.reset()
    yield FaultyFS
    FaultyFS.reset()


def temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if ".tmp-" in p.name]


def assert_nothing_partial(store: RunStore, root: Path) -> None:
    """Every .parquet on disk is a complete shard, every manifest entry names one."""
    assert not temporaries(root), temporaries(root)
    for f in (root / "stages").rglob("*.parquet") if (root / "stages").exists() else []:
        rel = f.relative_to(root).as_posix()
        stage = rel.split("/")[1]
        part = dict(p.split("=", 1) for p in rel.split("/")[2:-1])
        assert store.shard_info(stage, f.stem, part) is not None, f"unreadable shard {rel}"
    for stage in store.stages_present():
        for info in store.manifest(stage):
            assert store.shard_info(stage, info.shard_id, info.partition) is not None, info.path


@pytest.fixture
def ref():
    return reference()[0]


@pytest.mark.parametrize("budget", [60_000, 400_000])
def test_full_disk_fails_clearly_then_resumes(tmp_path, faulty, ref, budget):
    root = tmp_path / "run"
    uri = f"{PROTOCOL}://{root}"
    cfg = tiny_cfg(uri)
    faulty.configure(budget=budget)
    try:
        _, stats, _ = run_local(cfg, uri)
        failures = [f for s in stats.values() for f in s.failures]
        # shard writes failed: each failure names the shard and the errno, in one line
        assert failures and all("No space left on device" in f for f in failures), failures
        assert all("\n" not in f and "[Errno 28]" in f for f in failures)
    except OSError as e:  # a state/manifest write hit the full disk: the build stops with it
        assert e.errno == errno.ENOSPC
    assert faulty.refused, "the budget was never reached: the test would prove nothing"
    store = RunStore(uri)
    assert_nothing_partial(store, root)

    faulty.configure(budget=None)  # space freed: the same command continues
    _, stats, executed = run_local(cfg, uri)
    assert not any(s.failures for s in stats.values())
    assert all_rows(RunStore(uri)) == ref
    assert_nothing_partial(RunStore(uri), root)


def test_read_only_run_dir_is_one_clear_error(tmp_path, faulty, ref):
    root = tmp_path / "run"
    uri = f"{PROTOCOL}://{root}"
    run_local(tiny_cfg(uri), uri)  # a finished build, then the volume turns read-only
    before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    faulty.configure(read_only=True)
    cfg = tiny_cfg(uri).model_copy(update={"seed": 4})  # a change: every shard must be rewritten
    with pytest.raises(OSError) as info:
        run_local(cfg, uri)
    assert info.value.errno == errno.EROFS and "Read-only file system" in str(info.value)
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == before
    faulty.reset()
    assert all_rows(RunStore(uri)) == ref  # the finished build is untouched
