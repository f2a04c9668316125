"""The CLI's exit code matches the build's final state when Ctrl-C comes late: once the build
is complete (state.json, export), an interrupt neither turns it into exit 130 nor prints a
second message."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import typer


def test_ctrl_c_after_the_summary_exits_with_the_final_code():
    for code in (0, 1):
        script = (
            "import os, signal, time\n"
            "from forenset import cli\n"
            f"cli._exit_on_sigint({code})\n"
            "os.kill(os.getpid(), signal.SIGINT)\n"
            "time.sleep(30)\n"
            "raise SystemExit(5)\n"
        )
        p = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
            env=dict(os.environ),
        )  # fmt: skip
        assert p.returncode == code, p.stderr[-2000:]
        assert "Traceback" not in p.stderr and "KeyboardInterrupt" not in p.stderr


def complete_copy(built, tmp_path):
    """A copy of the shared build with its export written, as the build's flow ends it."""
    import shutil

    from forenset.exports.dataset import export_dataset
    from forenset.store.run_store import RunStore

    store, cfg = built
    shutil.copytree(store.uri, tmp_path / "run")
    copy = RunStore(str(tmp_path / "run"))
    export_dataset(copy, cfg.export)
    return copy, cfg


def test_an_interrupt_of_a_complete_build_is_exit_0(built, tmp_path, capsys):
    from forenset import cli

    store, cfg = complete_copy(built, tmp_path)
    with pytest.raises(typer.Exit) as e:
        cli._completed_anyway(store.uri, cfg, False)
    assert e.value.exit_code == 0
    assert "Interrupted after the build completed" in capsys.readouterr().out


def test_an_interrupt_of_an_incomplete_build_stays_130(built, tmp_path):
    from forenset import cli

    store, cfg = complete_copy(built, tmp_path)
    store.write_json("state.json", {**store.read_json("state.json"), "status": "interrupted"})
    cli._completed_anyway(store.uri, cfg, False)  # returns: the caller then fails with 130
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_status_fits_80_columns_and_folds_the_stages_not_enabled(built, monkeypatch):
    from rich.console import Console
    from typer.testing import CliRunner

    from forenset import cli

    store, _ = built
    narrow = Console(width=80, record=True, color_system=None)
    monkeypatch.setattr(cli, "console", narrow)
    res = CliRunner().invoke(cli.app, ["status", store.uri])
    assert res.exit_code == 0, res.output
    text = narrow.export_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in text
    words = {w for line in lines for w in line.split()}
    # the shared build enables evaluation and FakeBench, not the reward and public families
    assert {"sources", "explanations", "eval_scores", "fakebench_answers"} <= words
    assert "9 benchmark stages not enabled" in text
    assert not any(w.startswith("reward_") for w in words)
