"""Helpers for running ``forenset build`` as a separate process group, as a node would."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from forenset.config import validate_config
from tests.conftest import small_config_dict


def tiny_config_dict(run_dir: str | Path) -> dict:
    """Two photos, one generator, no safety path: 26 shards through every stage."""
    return small_config_dict(
        run_dir,
        shard_size=1,
        sources={"samples": ["astronaut", "coffee"], "max_side": 64},
        generators=[{"name": "cv-a", "family": "classical"}],
        scenarios={"enabled": False},
    )


def tiny_cfg(run_dir: str | Path):
    return validate_config(tiny_config_dict(run_dir))


@functools.cache
def reference() -> tuple[dict[str, list[dict]], int]:
    """Rows of an uninterrupted bare-loop build of the tiny config and its shard file count,
    computed once per test process (several modules compare against it)."""
    from tests.helpers import all_rows, run_local

    run = Path(tempfile.mkdtemp(prefix="forenset-reliability-ref-")) / "run"
    store, stats, _ = run_local(tiny_cfg(run))
    assert not any(s.failures for s in stats.values())
    return all_rows(store), committed(run)


def write_config(tmp_path: Path) -> Path:
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(tiny_config_dict(tmp_path / "unused")))
    return p


def start_build(cfg: Path, run: Path) -> subprocess.Popen:
    """``forenset build`` as the leader of a new session (its own process group)."""
    return subprocess.Popen(
        [sys.executable, "-m", "forenset.cli", "build", str(cfg), "--run-dir", str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
        start_new_session=True,
    )


def committed(run: Path) -> int:
    stages = run / "stages"
    return len(list(stages.rglob("*.parquet"))) if stages.exists() else 0


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state) of a live process, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[1]), fields[0]


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (children of children included)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (st := _stat(int(d.name))) is not None:
            parents[int(d.name)] = st[0]
    out: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier} - out
        out |= frontier
    return out


def alive(pids: set[int]) -> set[int]:
    """The pids that are still running (a zombie waiting to be reaped counts as dead)."""
    return {p for p in pids if (st := _stat(p)) is not None and st[1] != "Z"}


def kill_group(proc: subprocess.Popen, timeout: float = 15.0) -> set[int]:
    """SIGKILL the whole process group; return the processes that survived it (orphans)."""
    import signal

    tree = descendants(proc.pid) | {proc.pid}
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()
    deadline = time.time() + timeout
    while alive(tree) and time.time() < deadline:
        time.sleep(0.05)
    return alive(tree)
