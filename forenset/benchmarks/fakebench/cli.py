"""The FakeBench family's commands (mounted at top level): fakebench, fakebench-export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from forenset.benchmarks.common.cli import built_store, console, echo_fail, fail, open_run

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="FakeBench: scores and the benchmark export."
)


@app.command("fakebench")
def fakebench(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
) -> None:
    """FakeBench: FakeClass accuracy, FakeClue and FakeQA scores per evaluated model (from the
    fakebench_scores table)."""
    store = open_run(run_dir)
    if not store.manifest("fakebench_scores"):
        fail(f"{run_dir} has no fakebench_scores: build it with fakebench.enabled and a model")
    from forenset.benchmarks.fakebench.report import (
        CLASS_HEADERS,
        CLUE_HEADERS,
        DASH,
        TEXT_HEADERS,
        fakebench_tables,
    )
    from forenset.store.views import connect

    t = fakebench_tables(connect(store, ["fakebench_scores"]))
    if t is None:
        fail(f"{run_dir} has a fakebench_scores table without ok rows")
    for title, headers, rows in (
        ("FakeClass: accuracy (%) [95% CI]", CLASS_HEADERS, t.fakeclass),
        ("FakeClue (inference / fault-finding mode) [95% CI]", CLUE_HEADERS, t.fakeclue),
        ("FakeQA (free mode) [95% CI over images]", TEXT_HEADERS, t.fakeqa),
    ):
        table = Table(title=title)
        for col in headers:
            table.add_column(col, justify="left" if col == "model" else "right")
        for row in rows:
            table.add_row(*row)
        console.print(table)
    if t.models:
        console.print("models: " + "; ".join(t.models))
    for (header, why), where in t.reasons.items():
        console.print(f"{DASH} {header}: {why} ({', '.join(where)})")
    for caveat in t.caveats:
        console.print(caveat)


@app.command("fakebench-export")
def fakebench_export_cmd(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Export folder (default: <run>/exports/fakebench-bench)."),
    ] = None,
    labelstudio: Annotated[
        bool,
        typer.Option("--labelstudio", help="Also write the FakeClue golden-clue editing task."),
    ] = False,
    official: Annotated[
        Path | None,
        typer.Option(
            "--official",
            help="Write the items in FakeBench's official release format to this folder "
            "(Evaluation/*.json + FakeBench_images/), for the release's eval_*.py scripts.",
        ),
    ] = None,
) -> None:
    """FakeBench items (FakeClass, FakeClue, FakeQA) as an HF dataset, one config per task, or
    with --official in the official release's format."""
    from forenset.benchmarks.fakebench.bench_export import export_clue_task, export_fakebench_bench
    from forenset.exports.data import default_out

    store = built_store(run_dir)
    if official is not None:
        from forenset.benchmarks.fakebench.official_export import export_official

        try:
            typer.echo(json.dumps(export_official(store, official)))
        except ValueError as e:
            echo_fail(str(e))
        return
    try:
        dest = out or default_out(store, "fakebench-bench")
        res = export_fakebench_bench(store, dest)
        if labelstudio:
            res["labelstudio"] = export_clue_task(store, dest / "labelstudio")["counts"]
    except ValueError as e:
        echo_fail(str(e))
    typer.echo(json.dumps(res))
