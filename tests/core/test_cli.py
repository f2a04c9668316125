"""The CLI end to end through Prefect (ephemeral API), including SIGKILL + resume."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from forenset.config import validate_config
from forenset.store.run_store import RunStore
from tests.conftest import small_config_dict
from tests.helpers import all_rows, run_local

pytestmark = pytest.mark.slow


def cli(*args: str, check: bool = True, timeout: int = 300) -> subprocess.CompletedProcess:
    p = subprocess.run(
        [sys.executable, "-m", "forenset.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )
    if check and p.returncode != 0:
        raise AssertionError(
            f"forenset {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
        )
    return p


@pytest.fixture
def cfg_file(tmp_path):
    d = small_config_dict(tmp_path / "unused", shard_size=1)
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(d))
    return p, d


def committed(run: Path) -> int:
    return len(list((run / "stages").rglob("*.parquet"))) if (run / "stages").exists() else 0


def noop_build(path: Path, run: Path) -> subprocess.CompletedProcess:
    """``forenset build`` in a fresh interpreter that reports, on stderr, which of Prefect, the
    flow module and Prefect's server it imported."""
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['forenset', 'build', {str(path)!r}, '--run-dir', {str(run)!r}]\n"
        "try:\n    runpy.run_module('forenset.cli', run_name='__main__')\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        "watch = ('prefect', 'forenset.flows.build', 'prefect.server.api.server')\n"
        "print('imported:', [m for m in watch if m in sys.modules], file=sys.stderr)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert p.returncode == 0, p.stderr
    return p


@pytest.mark.usefixtures("prefect_api")
def test_build_query_status_and_noop_rerun(tmp_path, cfg_file):
    path, _ = cfg_file
    run = tmp_path / "run"
    out = cli("build", str(path), "--run-dir", str(run)).stdout
    assert "explanations" in out and "Export:" in out
    ran, tasks = map(int, re.search(r"Ran (\d+) shards in (\d+) Prefect tasks", out).groups())
    assert tasks < ran  # one-row shards are bundled into tasks of ~1 s of work
    tables = [
        "sources",
        "captions",
        "instructions",
        "candidates",
        "diffs",
        "judgments",
        "verdicts",
        "splits",
        "perturbations",
        "explanations",
    ]
    counts = ", ".join(f"(SELECT count(*) FROM {t}) AS {t}" for t in tables)
    res = json.loads(cli("query", str(run), f"SELECT {counts}", "--format", "json").stdout)
    assert [t for t in tables if not res[0][t] > 0] == []  # every table queried, none empty
    csv = cli(
        "query",
        str(run),
        "SELECT generator, count(*) n FROM candidates GROUP BY 1 ORDER BY 1",
        "-f",
        "csv",
    ).stdout
    assert csv.splitlines()[0] == "generator,n" and "cv-faulty" in csv
    st = cli("status", str(run)).stdout
    assert "build complete" in st and "judgments" in st
    assert "Edit-Check discard rate" in st and "XPlainVerse: 56.5%" in st
    export_dir = run / "exports" / "parquet"
    mtimes = {p.name: p.stat().st_mtime_ns for p in export_dir.iterdir()}
    again = noop_build(path, run)
    assert again.stdout.splitlines() == [f"Nothing to do: all {ran} shards are up to date ({run})."]
    # decided before Prefect: the flow module, Prefect and its API server never loaded
    assert again.stderr.strip().splitlines()[-1] == "imported: []"
    assert {p.name: p.stat().st_mtime_ns for p in export_dir.iterdir()} == mtimes
    assert (run / "config.yaml").exists() and (run / "config_hash.txt").exists()
    assert (run / "exports" / "parquet" / "train.parquet").exists()
    out = cli("split", str(run), "--holdout", "faulty").stdout
    assert "Splits regenerated" in out and "candidates" not in out.split("Shards recomputed")[1]
    p = cli("split", str(run), "--holdout", "nosuch", check=False)
    assert p.returncode == 2 and "unknown generator family" in p.stderr


def test_user_errors_are_one_sentence(tmp_path, cfg_file):
    path, d = cfg_file
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(dict(d, shards=3)))
    p = cli("build", str(bad), check=False)
    assert p.returncode == 2 and "unknown key 'shards'" in p.stderr and "Traceback" not in p.stderr
    p = cli("query", str(tmp_path / "nowhere"), "select 1", check=False)
    assert p.returncode == 2 and "does not exist" in p.stderr
    run = tmp_path / "locked"
    run.mkdir()
    (run / "build.lock").write_text(
        json.dumps({"pid": os.getpid(), "host": os.uname().nodename})
    )  # held by this live process
    p = cli("build", str(path), "--run-dir", str(run), check=False)
    assert (
        p.returncode == 2
        and "is being built by process" in p.stderr
        and "Traceback" not in p.stderr
    )


def prefect_servers_of(pid: int) -> list:
    """The ephemeral Prefect API servers started by process ``pid``."""
    import psutil

    out = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if "prefect.server.api.server" in " ".join(child.cmdline()):
                out.append(child)
        except psutil.NoSuchProcess:
            pass
    return out


def gone_within(procs: list, seconds: float) -> bool:
    import psutil

    _, alive = psutil.wait_procs(procs, timeout=seconds)
    return not alive


def test_sigkill_then_resume_gives_identical_rows(tmp_path, cfg_file):
    path, d = cfg_file
    ref_store, _, _ = run_local(validate_config(dict(d, run_dir=str(tmp_path / "ref"))))
    ref = all_rows(ref_store)
    run = tmp_path / "killed"
    env = dict(os.environ)
    signals, orphans = [], 0
    for k, sig in ((1, signal.SIGKILL), (12, signal.SIGINT), (40, signal.SIGKILL)):
        log = tmp_path / f"stderr-{k}.txt"  # a file, not a pipe: an orphaned server keeps pipes
        with open(log, "w") as errf:
            proc = subprocess.Popen(
                [sys.executable, "-m", "forenset.cli", "build", str(path), "--run-dir", str(run)],
                stdout=subprocess.DEVNULL,
                stderr=errf,
                env=env,
            )
            deadline = time.time() + 240
            while committed(run) < k and proc.poll() is None and time.time() < deadline:
                time.sleep(0.02)
            if proc.poll() is None:
                servers = prefect_servers_of(proc.pid)
                proc.send_signal(sig)
                proc.wait(timeout=120)
                if sig == signal.SIGKILL:  # atexit never ran: the watchdog stops the server
                    assert servers, "the build ran without an ephemeral server: nothing checked"
                    assert gone_within(servers, 30), (
                        "a killed build left its Prefect server running"
                    )
                    orphans += len(servers)
                if sig == signal.SIGINT:  # Ctrl-C: running shards finish and commit, one sentence
                    stderr = log.read_text()
                    assert proc.returncode == 130, stderr[-2000:]
                    assert "build interrupted" in stderr and "Traceback" not in stderr
                    assert "shards committed" in stderr  # the scheduler's count reached the user
                    # one message: Prefect's "Finished in state Cancelled(...)" echo is not
                    # printed beside it, nor a crash report; the flow run ends Cancelled
                    assert "Finished in state" not in stderr and "Crash" not in stderr, stderr
                    from tests.core.test_build_states import _read_flow_run_and_logs

                    assert _read_flow_run_and_logs()[0] == "CANCELLED"
                    assert json.loads((run / "state.json").read_text())["status"] == "interrupted"
                    signals.append(sig)
            proc.wait()
    assert signal.SIGINT in signals, "the build finished before Ctrl-C: the test proved nothing"
    assert orphans, "no SIGKILL hit a running build: the server reaping went unchecked"
    cli("build", str(path), "--run-dir", str(run))
    assert not list(run.rglob("*.tmp-*"))  # a killed build's temporaries are cleaned on resume
    assert all_rows(RunStore(str(run))) == ref
    # nothing partial is visible: every file a manifest names is a complete, readable shard
    store = RunStore(str(run))
    for stage in ref:
        for info in store.manifest(stage):
            assert store.shard_info(stage, info.shard_id, info.partition) is not None
