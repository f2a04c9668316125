"""Honest build states: a build with a failed shard ends its Prefect flow run Failed with the
reason (run log, state.json, ``forenset status``), labels its export partial, and a piped
build prints periodic one-line progress. ``forenset status`` counts committed shards on disk
while a build runs."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap

import pytest
import yaml
from typer.testing import CliRunner

from forenset.cli import app
from forenset.config import validate_config
from forenset.flows.build import run_build
from forenset.tasks.diffs import Diffs
from tests.conftest import small_config_dict
from tests.helpers import run_local


def _small(run_dir, **over):
    return small_config_dict(
        run_dir,
        sources={"samples": ["coffee", "rocket"], "max_side": 64},
        scenarios={"enabled": False},
        **over,
    )


def _flow_run_and_logs(name_part: str, want: str = ""):
    """The latest forenset-build flow run (state type, message) and its log lines (polled a
    few seconds for a line containing ``want``: run logs reach the API in batches)."""
    import time

    from prefect.logging.handlers import APILogHandler

    APILogHandler().flush()
    deadline = time.monotonic() + 20
    while True:
        out = _read_flow_run_and_logs()
        if not want or any(want in m for m in out[2]) or time.monotonic() > deadline:
            return out
        time.sleep(0.5)


def _read_flow_run_and_logs():
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        LogFilter,
        LogFilterFlowRunId,
    )
    from prefect.client.schemas.sorting import FlowRunSort

    async def main():
        async with get_client() as c:
            runs = await c.read_flow_runs(
                flow_filter=FlowFilter(name=FlowFilterName(any_=["forenset-build"])),
                sort=FlowRunSort.START_TIME_DESC,
                limit=1,
            )
            run = runs[0]
            logs = await c.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id]))
            )
            return run.state.type.value, run.state.message or "", [r.message for r in logs]

    return asyncio.run(main())


def test_failed_shard_fails_the_flow_run_with_reasons_everywhere(tmp_path, monkeypatch):
    cfg = validate_config(_small(tmp_path / "run", export={"formats": ["parquet", "hf"]}))
    real = Diffs.process
    calls: list[str] = []

    def flaky(self, batch, spec):
        calls.append(spec.key())
        if len(calls) == 1:
            raise RuntimeError("injected disk fault")
        return real(self, batch, spec)

    monkeypatch.setattr(Diffs, "process", flaky)
    result = run_build(cfg.run_dir, cfg)
    assert result["stages"]["diffs"]["failed"] == 1
    assert "(diffs 1," in result["failed"] and "injected disk fault" in result["failed"]

    state_type, message, logs = _flow_run_and_logs("forenset-build", want="build done:")
    assert state_type == "FAILED", (state_type, message)  # today: COMPLETED
    assert "injected disk fault" in message
    assert any("injected disk fault" in m for m in logs), logs  # the run logger, for the UI
    assert any(m.startswith("build done:") for m in logs), logs

    state = json.loads((tmp_path / "run" / "state.json").read_text())
    assert state["status"] == "failed" and "injected disk fault" in state["message"]
    assert any("injected disk fault" in f for f in state["stages"]["diffs"]["failures"])

    marker = json.loads((tmp_path / "run" / "exports/parquet/_fingerprint.json").read_text())
    assert marker["partial"] is True and "injected disk fault" in marker["partial_reason"]
    hf = json.loads((tmp_path / "run" / "exports/hf/export.json").read_text())
    assert hf["partial"] is True and "injected disk fault" in hf["partial_reason"]
    card = (tmp_path / "run" / "exports/hf/README.md").read_text()
    header = yaml.safe_load(card.split("---\n")[1])
    assert header["partial"] is True and "**Partial export.**" in card

    out = CliRunner().invoke(app, ["status", str(tmp_path / "run")])
    assert out.exit_code == 0, out.output
    assert "build failed" in out.output and "why:" in out.output
    assert "injected disk fault" in out.output

    # the rerun retries the failed shard, completes, and the export is no longer partial
    monkeypatch.setattr(Diffs, "process", real)
    again = run_build(cfg.run_dir, cfg)
    assert not again["failed"] and again["stages"]["diffs"]["run"] == 1
    assert _flow_run_and_logs("forenset-build")[0] == "COMPLETED"
    marker = json.loads((tmp_path / "run" / "exports/parquet/_fingerprint.json").read_text())
    assert marker["partial"] is False
    assert json.loads((tmp_path / "run" / "exports/hf/export.json").read_text())["partial"] is False
    assert "Partial export" not in (tmp_path / "run" / "exports/hf/README.md").read_text()


def test_status_counts_shards_committed_on_disk_during_a_build(tmp_path):
    cfg = validate_config(_small(tmp_path / "run"))
    store, stats, _ = run_local(cfg)
    run = tmp_path / "run"
    n_diffs = len(store.manifest("diffs"))
    assert n_diffs > 0
    # as in the middle of a build: shards committed, manifests not yet written (they are
    # written once, at the end), state.json says running
    for m in run.glob("stages/*/_manifest.json"):
        m.unlink()
    state = json.loads((run / "state.json").read_text())
    state["status"] = "running"
    (run / "state.json").write_text(json.dumps(state))
    out = CliRunner().invoke(app, ["status", str(run)], terminal_width=200)
    assert out.exit_code == 0, out.output
    line = next(ln for ln in out.output.splitlines() if ln.split()[:1] == ["diffs"])
    assert line.split()[1] == str(n_diffs), out.output  # shards done; today: 0 (manifests)


FAIL_ONE_DIFFS_SHARD = """
import sys, time
from forenset.tasks.diffs import Diffs
real = Diffs.process
calls = []
def flaky(self, batch, spec):
    calls.append(1)
    if len(calls) == 1:
        time.sleep(1.5)  # a stalled disk: the build outlasts the 0.5 s progress period
        raise RuntimeError("injected disk fault")
    return real(self, batch, spec)
Diffs.process = flaky
from forenset.cli import app
app(sys.argv[1:])
"""


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_api")
def test_piped_build_prints_periodic_progress_and_says_why_it_failed(tmp_path):
    cfg = _small(tmp_path / "run")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = dict(os.environ, FORENSET_PROGRESS_SECONDS="0.5")
    p = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FAIL_ONE_DIFFS_SHARD), "build", str(path)],
        capture_output=True,  # not a terminal: no bars, periodic lines instead
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 1, p.stderr[-3000:]
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("progress: ")]
    assert lines, p.stdout[-3000:]  # today: nothing until the final table
    assert any("sources" in ln for ln in lines)
    assert "build failed:" in p.stderr and "injected disk fault" in p.stderr
    assert "Traceback" not in p.stderr
