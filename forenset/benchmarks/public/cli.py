"""The public benchmarks' commands (mounted at top level): ``public`` (the scores of a run) and
``public-import`` (an importer dry run on a folder: items and error rows per task, nothing
stored), so a download can be checked before a build."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from forenset.benchmarks.common.cli import console, fail, open_run

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Public benchmarks: import and scores."
)

BENCHMARKS = ("fakeclue", "loki", "sofake_ood", "aigi_holmes")


@app.command("public")
def public(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
) -> None:
    """Scores per model, benchmark, task type and group [95% CI] (from public_scores)."""
    store = open_run(run_dir)
    if not store.manifest("public_scores"):
        fail(
            f"{run_dir} has no public_scores: build it with public.enabled, a benchmark and a model"
        )
    from forenset.benchmarks.common.scoring import pivot, scorers
    from forenset.store.views import connect

    con = connect(store, ["public_scores"])
    cur = con.execute("SELECT * FROM public_scores WHERE status = 'ok'")
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    if not rows:
        fail(f"{run_dir} has a public_scores table without ok rows")
    for task in ("judgement", "multiple_choice", "explanation"):
        mine = [r for r in rows if r["task"] == task]
        if not mine:
            continue
        p = pivot(mine, ("answerer", "benchmark", "group_kind", "group"), scorers("public"),
                  index_headers=("model", "benchmark", "by", "group"))  # fmt: skip
        table = Table(title=f"{task} [95% CI]")
        for h in p.headers:
            table.add_column(
                h, justify="left" if h in ("model", "benchmark", "by", "group") else "right"
            )
        for line in p.rows:
            table.add_row(*line)
        console.print(table)
        for (header, why), where in p.notes.items():
            console.print(f"- {header}: {why} ({len(where)} group{'s' if len(where) > 1 else ''})")
        if p.models:
            console.print("models: " + "; ".join(p.models))


@app.command("public-import")
def public_import(
    name: Annotated[str, typer.Argument(help=f"Benchmark: {', '.join(BENCHMARKS)}.")],
    path: Annotated[str, typer.Argument(help="The release's folder, in its own layout.")],
    annotations: Annotated[
        str | None, typer.Option("--annotations", help="The annotation file, when elsewhere.")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Records per file.")] = None,
    errors: Annotated[int, typer.Option("--errors", min=0, help="Error rows to show.")] = 5,
) -> None:
    """Read a release's folder as public_items would (nothing stored): items and error rows per
    task, and the first errors' reasons."""
    if name not in BENCHMARKS:
        fail(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
    from collections import Counter

    from forenset.benchmarks.public.formats.importers import import_records
    from forenset.benchmarks.public.formats.records import reason

    counts: Counter[tuple[str, str]] = Counter()
    shown: list[str] = []
    try:
        for r in import_records(name, path, annotations, limit):
            counts[(r["task"], r["status"])] += 1
            if r["status"] == "error" and len(shown) < errors:
                shown.append(f"{r['item_id']}: {r['error']}")
    except (OSError, ValueError) as e:
        fail(f"{name} at {path}: {reason(e)}")
    table = Table(title=f"{name}: {path}")
    for h in ("task", "ok", "error"):
        table.add_column(h, justify="left" if h == "task" else "right")
    for task in sorted({t for t, _ in counts}):
        table.add_row(task, str(counts[(task, "ok")]), str(counts[(task, "error")]))
    console.print(table)
    for line in shown:
        console.print(f"- {line}")
