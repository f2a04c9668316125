"""Ctrl-C twice: the first stops new work and waits for running shards, the second quits now.

A captions request is held open by the fake model server, so a captions shard is running for as
long as the test wants: waiting for it would take until the gate opens (90 s), quitting must
not. Then the server answers and the same command resumes the run to the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import yaml

from forenset.store.run_store import RunStore
from forenset.testing.fake_openai import FakeOpenAI
from tests.reliability.clikit import alive, descendants, tiny_config_dict
from tests.stages.scripted import ScriptedModel, llm


def _wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.slow  # CLI builds, each with its own Prefect server
def test_second_ctrl_c_quits_at_once_and_resume_completes(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_OPENAI_KEY", "sk-test-openai")
    from forenset.testing import fake_openai

    gate = threading.Event()  # closed: every chat request hangs in the server
    srv = FakeOpenAI(reply=ScriptedModel(fake_openai))
    srv.fault_for = lambda body: gate.wait(90) and None
    run = tmp_path / "run"
    log = tmp_path / "stderr.txt"
    cfg = tmp_path / "cfg.yaml"
    cmd = [sys.executable, "-m", "forenset.cli", "build", str(cfg), "--run-dir", str(run)]
    with srv:  # started: its URL goes into the config
        settings = llm("openai", srv, max_retries=0)
        settings["pool"][0]["timeout_s"] = 120.0
        d = tiny_config_dict(tmp_path / "unused")
        d["captions"] = {"llm": settings, "keep_manifest": False}
        cfg.write_text(yaml.safe_dump(d))
        try:
            with open(log, "w") as errf:
                proc = subprocess.Popen(
                    cmd, stdout=subprocess.DEVNULL, stderr=errf, env=dict(os.environ)
                )
                _wait_for(lambda: srv.requests or proc.poll() is not None, 240, "a captions call")
                assert proc.poll() is None, log.read_text()[-2000:]
                tree = descendants(proc.pid)  # the ephemeral API server and its watchdog
                proc.send_signal(signal.SIGINT)
                _wait_for(lambda: "Ctrl-C again" in log.read_text(), 60, "the first Ctrl-C's note")
                assert proc.poll() is None, "the first Ctrl-C did not wait for the running shard"
                t0 = time.monotonic()
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=60)
                quit_s = time.monotonic() - t0
        finally:
            gate.set()
        stderr = log.read_text()
        assert proc.returncode == 130, stderr[-2000:]
        assert quit_s < 15, f"the second Ctrl-C took {quit_s:.1f}s (the held request: 90 s)"
        assert "stopped without waiting" in stderr and "Traceback" not in stderr, stderr[-2000:]
        assert json.loads((run / "state.json").read_text())["status"] == "interrupted"
        assert not (run / "build.lock").exists()  # released: another host may build next
        assert tree, "the build ran without an ephemeral server: nothing checked"
        _wait_for(lambda: not alive(tree), 30, "the ephemeral server to stop")
        assert not (run / "stages" / "captions").exists() or not list(
            (run / "stages" / "captions").rglob("*.parquet")
        ), "a captions shard was committed although its request never returned"

        # the server answers again: the same command resumes and finishes
        out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    assert out.returncode == 0, out.stderr[-2000:]
    store = RunStore(str(run))
    assert json.loads((run / "state.json").read_text())["status"] == "complete"
    assert not list(run.rglob("*.tmp-*"))
    caps = [r for i in store.manifest("captions") for r in store.read_shard(i).to_pylist()]
    assert len(caps) == 2 and all(r["status"] == "ok" for r in caps), caps
    assert store.manifest("explanations"), "the resumed build did not reach the last stage"
