"""Two builds on one run directory: exactly one runs, the other stops with the lock message."""

from __future__ import annotations

import pytest

from forenset.store.run_store import RunStore
from tests.helpers import all_rows
from tests.reliability.clikit import reference, start_build, write_config

# CLI builds report to this worker's Prefect server (conftest.py: prefect_api)
pytestmark = pytest.mark.usefixtures("prefect_api")


@pytest.mark.slow  # two CLI builds, each with its own Prefect server
def test_two_concurrent_builds_one_runs(tmp_path):
    ref, _ = reference()
    cfg = write_config(tmp_path)
    run = tmp_path / "shared"
    procs = [start_build(cfg, run), start_build(cfg, run)]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 2], (codes, [e[-1500:] for _, e in outs])
    loser = outs[codes.index(2)][1]
    assert "is being built by process" in loser and "Traceback" not in loser
    winner_pid = procs[codes.index(0)].pid
    assert f"process {winner_pid}" in loser  # the message names the build that holds the lock
    assert not (run / "build.lock").exists()
    assert all_rows(RunStore(str(run))) == ref
