"""The run-directory lock on a (shared) POSIX filesystem: a lease renewed by a heartbeat.

A lock left by a process on another host cannot be checked by pid: it is taken over once its
heartbeat is older than its lease, and refused (naming host, pid and heartbeat) before.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from forenset.store.run_store import RunLockedError, RunStore
from forenset.store.storage import StorageConfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _foreign_lock(path, heartbeat_age_s: float, lease_s: float = 30) -> dict:
    now = time.time()
    doc = {
        "host": "gpu-node-7",
        "pid": 4242,
        "token": "t" * 32,
        "started": now - 3600,
        "heartbeat": now - heartbeat_age_s,
        "lease_s": lease_s,
    }
    path.write_text(json.dumps(doc))
    return doc


def test_lock_of_another_host_is_refused_while_its_lease_runs(tmp_path):
    _foreign_lock(tmp_path / "build.lock", heartbeat_age_s=5)
    store = RunStore(str(tmp_path))
    with pytest.raises(RunLockedError) as e:
        store.acquire_lock()
    msg = str(e.value)
    assert "process 4242 on host gpu-node-7" in msg
    assert re.search(r"last heartbeat \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC, \d+ s ago", msg), msg
    assert "expire 30 s after its last heartbeat" in msg
    assert msg.count(". ") == 0 and msg.endswith(".")  # one sentence


def test_lock_of_another_host_is_taken_over_after_its_lease(tmp_path):
    _foreign_lock(tmp_path / "build.lock", heartbeat_age_s=31)
    store = RunStore(str(tmp_path))
    store.acquire_lock()
    held = store.lock_holder()
    assert held["pid"] == os.getpid() and held["host"] == os.uname().nodename
    store.release_lock()
    assert not (tmp_path / "build.lock").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith("build.lock")]


def test_a_frozen_holder_loses_the_lease_and_leaves_the_new_lock_alone(tmp_path):
    """A real holder process renews its lease; once it stops (SIGSTOP: a hung NFS client, a
    suspended VM) the lease expires and the next build takes over; the old holder, woken,
    sees a foreign token and neither renews nor removes the new lock."""
    env = {
        **os.environ,
        "PYTHONPATH": ROOT,
        "FORENSET_STORAGE": StorageConfig(lock_lease_s=6).model_dump_json(),
    }
    code = f"""
        import time
        from forenset.store.run_store import RunStore
        s = RunStore({str(tmp_path)!r})
        s.acquire_lock(); print("HELD", flush=True)
        time.sleep(8); s.release_lock(); print("RELEASED", flush=True)
        time.sleep(60)
        """
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "HELD"
        store = RunStore(str(tmp_path), StorageConfig(lock_lease_s=6))
        first = store.lock_holder()["heartbeat"]
        time.sleep(2.5)
        assert store.lock_holder()["heartbeat"] > first  # renewed every lease/3 = 2 s
        with pytest.raises(RunLockedError, match=f"process {holder.pid} on host"):
            store.acquire_lock()
        os.kill(holder.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 30
        while True:
            try:
                store.acquire_lock()
                break
            except RunLockedError:
                assert time.monotonic() < deadline, "the lease never expired"
                time.sleep(0.5)
        mine = store.lock_holder()
        assert mine["pid"] == os.getpid()
        os.kill(holder.pid, signal.SIGCONT)
        assert holder.stdout.readline().strip() == "RELEASED"
        assert store.lock_holder()["token"] == mine["token"]  # its release left ours alone
        store.release_lock()
        assert store.lock_holder() is None
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)


def test_files_left_by_a_killed_heartbeat_are_swept(tmp_path):
    (tmp_path / "build.lock.hb-deadbeef").write_text("{}")
    (tmp_path / "build.lock.stale-0badf00d").write_text("{}")
    store = RunStore(str(tmp_path))
    store.acquire_lock()
    try:
        assert store.remove_temp_files() == 2
        assert sorted(os.listdir(tmp_path)) == ["build.lock"]
    finally:
        store.release_lock()
