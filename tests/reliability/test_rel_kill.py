"""SIGKILL of the whole build process group at seeded-random points, then resume.

The CLI runs in its own session and the kill takes its process group, as when a node dies.
The builds report to a long-lived Prefect API server (this test worker's, as on a cluster),
which keeps each killed flow run as Running: every resume must still converge to the rows of
an uninterrupted run, leave no temporaries and no live process behind. That a killed build's
*ephemeral* server dies with it is test_ephemeral's and test_cli's kill test.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from forenset.seeds import rng_for
from forenset.store.run_store import RunStore
from tests.helpers import all_rows
from tests.reliability.clikit import committed, kill_group, reference, start_build, write_config

# CLI builds report to this worker's Prefect server (conftest.py: prefect_api)
pytestmark = pytest.mark.usefixtures("prefect_api")


@pytest.mark.parametrize(
    "kills",
    [
        pytest.param(2, id="2-kills", marks=pytest.mark.slow),
        pytest.param(6, id="6-kills", marks=pytest.mark.soak),
    ],
)
def test_sigkill_group_at_random_points_then_resume(tmp_path, kills):
    ref, total = reference()
    cfg = write_config(tmp_path)
    run = tmp_path / "killed"
    rng = rng_for("reliability", "sigkill", kills)
    points = []
    for i in range(kills):
        # kill once a seeded number of shards is committed, plus a seeded delay (mid-write)
        target = int(rng.integers(1, total))
        delay = float(rng.uniform(0.0, 0.5))
        proc = start_build(cfg, run)
        deadline = time.time() + 240
        while committed(run) < target and proc.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        time.sleep(delay)
        points.append((target, committed(run), proc.poll()))
        orphans = kill_group(proc)
        assert not orphans, f"kill {i}: processes survived the group kill: {orphans}"
    assert any(rc is None for _, _, rc in points), f"no build was killed mid-run: {points}"
    done = subprocess.run(
        [sys.executable, "-m", "forenset.cli", "build", str(cfg), "--run-dir", str(run)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert not [p for p in run.rglob("*") if ".tmp-" in p.name]
    assert not (run / "build.lock").exists()
    store = RunStore(str(run))
    assert all_rows(store) == ref
    for stage in ref:
        for info in store.manifest(stage):
            assert store.shard_info(stage, info.shard_id, info.partition) is not None
