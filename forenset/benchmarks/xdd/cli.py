"""``forenset xdd-score``: a submission zip scored against an XDD reference, as the challenge's
leaderboard scores it, each key with n and an interval."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from forenset.benchmarks.common.cli import console, fail

app = typer.Typer(add_completion=False, no_args_is_help=True)


@app.command("xdd-score")
def xdd_score(
    reference: Annotated[Path, typer.Argument(help="The reference JSONL (id, label, ...).")],
    submission: Annotated[Path, typer.Argument(help="The submission zip (or its folder).")],
    bertscore_model: Annotated[
        str | None, typer.Option("--bertscore-model", help="Local encoder folder for BERTScore.")
    ] = None,
    sle_model: Annotated[
        str | None, typer.Option("--sle-model", help="Local SLE regression model folder.")
    ] = None,
    sle_stand_in: Annotated[
        bool,
        typer.Option("--sle-stand-in", help="The scorer's own stand-in for SLE (words / 10)."),
    ] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write scores.json and scores_detail.json here.")
    ] = None,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples (0: no intervals).")] = 1000,
) -> None:
    """Score SUBMISSION against REFERENCE with the XDD leaderboard's keys."""
    from rich.table import Table

    from forenset.benchmarks.common.scoring.intervals import IntervalsConfig
    from forenset.benchmarks.xdd.format import XddFormatError
    from forenset.benchmarks.xdd.run import score_files, write_scores

    if resamples < 0:
        fail("--resamples must be 0 or more")
    try:
        scores = score_files(reference, submission, bertscore_model=bertscore_model,
                             sle_model=sle_model, sle_stand_in=sle_stand_in,
                             intervals=IntervalsConfig(resamples=resamples))  # fmt: skip
    except XddFormatError as e:
        fail(str(e))
    table = Table(title="XDD leaderboard scores, value [95 % bootstrap interval]")
    for col in ("key", "value", "interval", "n", "model / reason"):
        table.add_column(col, overflow="fold")
    for s in scores:
        interval = "" if s.ci_low is None else f"[{s.ci_low:.4f}, {s.ci_high:.4f}]"
        value = "null" if s.value is None else f"{s.value:.4f}"
        table.add_row(s.key, value, interval, str(s.n), s.reason or s.model)
    console.print(table)
    if out is not None:
        write_scores(out, scores)
        console.print(f"wrote {out / 'scores.json'}", markup=False)


@app.command("xdd-import-gold")
def xdd_import_gold(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    reference: Annotated[Path, typer.Argument(help="The XDD reference JSONL (id, label, ...).")],
    append: Annotated[bool, typer.Option(help="Keep earlier gold imports.")] = False,
) -> None:
    """Store an XDD reference's texts as the run's gold_references (both tracks, reals
    included); score against them with evaluation.scorers.references: gold. Prints each
    problem class with its count."""
    import json

    from forenset.benchmarks.common.cli import open_run
    from forenset.benchmarks.xdd.format import XddFormatError
    from forenset.benchmarks.xdd.gold import import_xdd_gold

    store = open_run(run_dir)
    try:
        info, problems = import_xdd_gold(store, reference, append=append)
    except XddFormatError as e:
        fail(str(e))
    res = {"path": info.path, "rows": info.rows, "counts": info.counts,
           "problems": list(problems.values())}  # fmt: skip
    console.print_json(json.dumps(res))
