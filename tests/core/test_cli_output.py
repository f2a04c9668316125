"""What a user reads: the build summary at 80 columns, the export line, help text (no build)."""

from __future__ import annotations

import pytest
import typer
from rich.console import Console

from forenset import cli
from forenset.stages import is_benchmark_stage, stage_names


def stats_of(active: set[str], big: bool = False) -> dict[str, dict]:
    """A build's per-stage stats: ``active`` stages did work (large counts with ``big``), the
    others planned nothing."""
    n = 123_456 if big else 12
    out = {}
    for name in stage_names():
        on = name in active
        out[name] = {
            "planned": 1280 if on else 0,
            "run": 1280 if on else 0,
            "skipped": 0,
            "failed": 3 if on else 0,
            "rows": n if on else 0,
            "ok": n - n // 10 if on else 0,
            "error": n // 10 if on else 0,
            "kept": 100_000 if on else 0,
            "discarded": 23_456 if on else 0,
            "seconds": 1234.5 if on else 0.0,
            "failures": [],
        }
    return out


@pytest.mark.parametrize("big", [False, True])
def test_build_summary_fits_80_columns_with_every_stage_name_whole(big):
    construction = {n for n in stage_names() if not is_benchmark_stage(n)}
    active = construction | {"reward_responses", "fakebench_answers", "eval_scores"}
    out = Console(width=80, record=True, color_system=None)
    cli.print_build_summary(out, stats_of(active, big), "s3://ml-datasets/runs/a-long-run-name")
    text = out.export_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    words = {w for line in lines for w in line.split()}
    assert active <= words, active - words  # each stage name whole, once per stacked table
    assert "…" not in text  # no number and no name cut
    for v in ("123456" if big else "12", "1234.5", "1280"):
        assert v in words
    n_off = sum(1 for n in stage_names() if is_benchmark_stage(n)) - 3
    assert f"{n_off} benchmark stages not enabled" in text
    assert not any(w in words for w in ("reward_images", "fakebench_items", "eval_sets"))


def test_build_summary_on_a_wide_terminal_is_one_table():
    out = Console(width=150, record=True, color_system=None)
    cli.print_build_summary(out, stats_of({"sources", "candidates"}), "/tmp/run")
    text = out.export_text()
    assert text.count("stage ") == 1 and "discarded" in text
    # scenarios and prompts are construction stages: named, not called "not enabled"
    assert "15 benchmark stages not enabled" in text
    assert "no shards planned: captions" in text


def test_export_line_keeps_the_scheme_and_reads_counts():
    exp = {"counts": {"train": 12, "validation": 3, "test": 4}, "path": "ml-datasets/x"}
    line = cli.export_line("s3://ml-datasets/run/", exp, 5.04)
    assert (
        line
        == "Export: s3://ml-datasets/run/exports/parquet: train 12, validation 3, test 4 (5.0s)"
    )
    assert "{" not in cli.export_line("/tmp/r", {"counts": {}, "partial": True}, 1)


def commands():
    cli._mount_subapps()
    root = typer.main.get_command(cli.app)

    def walk(cmd, path):
        yield " ".join(path), cmd
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            yield from walk(sub, [*path, name])

    return list(walk(root, ["forenset"]))


def test_help_text_has_no_rst_markup():
    found = []
    for path, cmd in commands():
        texts = [cmd.help or "", cmd.short_help or ""]
        texts += [getattr(p, "help", None) or "" for p in cmd.params]
        found += [(path, t) for t in texts if "``" in t or ":func:" in t or ":class:" in t]
    assert not found


def test_a_local_dask_cluster_is_quiet_unless_something_is_wrong(monkeypatch):
    import logging

    from forenset.flows import build

    monkeypatch.delenv("DASK_LOGGING__DISTRIBUTED", raising=False)
    dist = logging.getLogger("distributed")
    monkeypatch.setattr(dist, "level", logging.INFO)
    build.quiet_dask()
    assert dist.level == logging.WARNING  # no INFO lines, here or in the workers it starts
    import os

    assert os.environ["DASK_LOGGING__DISTRIBUTED"] == "warning"
    monkeypatch.setenv("DASK_LOGGING__DISTRIBUTED", "debug")  # a user's own setting wins
    build.quiet_dask()
    assert dist.level == logging.DEBUG
    nanny = logging.getLogger("distributed.nanny")
    monkeypatch.setattr(nanny, "level", logging.NOTSET)
    quiet, restore = build.close_chatter()
    quiet()  # while the cluster closes: "Worker process still alive ..., killing" is not shown
    assert not nanny.isEnabledFor(logging.WARNING) and nanny.isEnabledFor(logging.ERROR)
    restore()
    assert nanny.level == logging.NOTSET


def test_prefect_does_not_echo_the_final_state_the_cli_reports():
    import logging

    cli.one_message_per_event()
    cli.one_message_per_event()  # idempotent: one filter per logger
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logger = logging.getLogger(name)
        assert sum(isinstance(f, cli._FinalStateEcho) for f in logger.filters) == 1

        def passes(level: int, msg: str, logger=logger, name=name) -> bool:
            return bool(logger.filter(logging.LogRecord(name, level, __file__, 1, msg, (), None)))

        assert not passes(logging.ERROR, "Finished in state Cancelled('build interrupted')")
        assert not passes(logging.ERROR, "Finished in state Failed('stage captions: ...')")
        assert passes(logging.ERROR, "Task run crashed: boom")  # anything else still shows
        assert passes(logging.INFO, "Finished in state Completed()")


def test_idle_stages_of_an_incomplete_build_are_not_called_disabled():
    from forenset.stages import fold_idle

    names = ["sources", "verdicts", "eval_sets", "reward_images"]
    idle = {"verdicts", "eval_sets", "reward_images"}
    assert fold_idle(names, idle) == (
        ["sources"],
        ["2 benchmark stages not enabled", "no shards planned: verdicts"],
    )
    assert fold_idle(names, idle, complete=False)[1][0] == (
        "2 benchmark stages not enabled or not reached yet"
    )
