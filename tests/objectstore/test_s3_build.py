"""The demo built on S3 (moto on 127.0.0.1) by the CLI, with a stage on two Dask worker
processes: killed at a random point, resumed, identical to a local build; and two builds
started together on one s3:// run directory, of which one is refused in one sentence.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from forenset.config import DEFAULT_CONFIG, load_config
from forenset.stages import stage_names
from forenset.store.run_store import RunStore
from tests.helpers import rows, run_local

# CLI builds report to this worker's Prefect server (conftest.py: prefect_api)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_api")]

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path) -> Path:
    """The demo, with its diffs stage on a local Dask cluster of two worker processes."""
    cfg = yaml.safe_load(DEFAULT_CONFIG.read_text())
    cfg["runners"] = {
        "default": {"kind": "threads", "max_workers": 2},
        "diffs": {"kind": "dask", "max_workers": 2},
    }
    path = tmp_path / "demo-s3.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _cli(args: list[str], tmp_path: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PREFECT_HOME": str(tmp_path / "prefect")}
    return subprocess.Popen(
        [sys.executable, "-m", "forenset.cli", "build", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _kill_tree(p: subprocess.Popen) -> None:
    """SIGKILL the build and every process it started (Dask workers, Prefect's server)."""
    if p.poll() is not None:
        return
    try:
        procs = [p.pid, *(c.pid for c in psutil.Process(p.pid).children(recursive=True))]
    except psutil.NoSuchProcess:
        procs = [p.pid]
    for pid in procs:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.wait(timeout=60)


def _wait_for_shards(store: RunStore, k: int, p: subprocess.Popen) -> None:
    """Until ``k`` shard files are committed (a fresh listing each time), bounded."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and p.poll() is None:
        try:
            n = sum(f.endswith(".parquet") for f in store.fs.find(store.path("stages")))
        except FileNotFoundError:
            n = 0
        if n >= k:
            return
        time.sleep(0.2)
    raise AssertionError(f"fewer than {k} shard files after 600 s")


def _digests(store: RunStore) -> dict[str, str]:
    """Per stage: hash of its rows (timing columns dropped, rows sorted by key)."""
    return {
        name: hashlib.sha256(json.dumps(rows(store, name), default=str).encode()).hexdigest()
        for name in stage_names()
    }


@pytest.mark.timeout(1800)  # three demo builds: ~4 min on an idle 2-core machine
def test_demo_on_s3_killed_and_resumed_matches_local(s3, tmp_path):
    cfg = _config(tmp_path)
    local = tmp_path / "local"
    run_local(load_config(cfg), str(local))  # the reference: the bare thread loop, local disk

    uri = f"s3://{s3.bucket}/demo"
    # a random point inside the build: after k committed shard files (the demo commits ~130),
    # then up to half a second more, so that some kills land mid-write
    k, delay = random.randint(5, 90), random.uniform(0, 0.5)
    print(f"SIGKILL after {k} shard files + {delay:.2f} s")  # shown when the test fails
    p = _cli([str(cfg), "--run-dir", uri], tmp_path)
    try:
        _wait_for_shards(RunStore(uri), k, p)
        time.sleep(delay)
        assert p.poll() is None, "the build ended before the kill: the test would prove nothing"
    finally:
        _kill_tree(p)
    store = RunStore(uri)
    state = store.read_json("state.json", default={}) or {}
    print("killed at:", {k: v.get("done") for k, v in state.get("stages", {}).items()})

    p = _cli([str(cfg), "--run-dir", uri], tmp_path)  # resume: the same command
    try:
        out, _ = p.communicate(timeout=1200)
    finally:
        _kill_tree(p)
    assert p.returncode == 0, out[-3000:]
    assert "Export:" in out or "Nothing to do" in out, out[-2000:]

    got, want = _digests(RunStore(uri)), _digests(RunStore(str(local)))
    assert got == want, {k for k in want if got.get(k) != want[k]}
    assert RunStore(uri).lock_holder() is None


def test_two_builds_on_one_s3_run_dir_one_is_refused(s3, tmp_path):
    cfg = yaml.safe_load(DEFAULT_CONFIG.read_text())
    cfg["sources"] = {"samples": ["coffee", "rocket"], "max_side": 64}
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(cfg))
    uri = f"s3://{s3.bucket}/run"
    builds = [_cli([str(path), "--run-dir", uri], tmp_path) for _ in range(2)]
    try:
        outs = [b.communicate(timeout=900)[0] for b in builds]
    finally:
        for b in builds:
            _kill_tree(b)
    codes = sorted(b.returncode for b in builds)
    assert codes[0] == 0 and codes[1] != 0, outs
    refused = next(o for b, o in zip(builds, outs, strict=True) if b.returncode != 0)
    winner = next(b for b in builds if b.returncode == 0)
    msg = " ".join(refused.split())
    assert f"is being built by process {winner.pid} on host {os.uname().nodename}" in msg, msg
    assert "last heartbeat" in msg and "Traceback" not in refused
