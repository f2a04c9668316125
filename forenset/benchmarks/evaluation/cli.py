"""The evaluation family's commands (mounted at top level): eval, export-gold, import-gold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from forenset.benchmarks.common.cli import console, fail, open_run, read_yaml

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="XPlainVerse evaluation: Table 5, gold references.",
)


@app.command("eval")
def eval_(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
) -> None:
    """Table 5: detection F1 / accuracy and explanation scores per detector, track and set (ID,
    OOD), each with n and its 95 % bootstrap interval; degenerate sets say "not meaningful"."""
    store = open_run(run_dir)
    if not store.manifest("eval_scores"):
        fail(f"{run_dir} has no eval_scores: build it with evaluation.enabled and a detector")
    from forenset.benchmarks.evaluation.report import (
        agreement_line,
        gold_agreement,
        per_class,
        robustness,
        table5,
    )
    from forenset.store.views import connect

    t5 = table5(connect(store, ["eval_scores"]))
    if t5 is None:
        fail(f"{run_dir} has an eval_scores table without scores of a whole set")
    _print(
        t5.headers,
        t5.rows,
        "Table 5: detection (%) and explanation scores, value [95 % bootstrap interval]",
        left=3,
    )
    if t5.models:
        console.print("models: " + "; ".join(t5.models), markup=False)
    for line in t5.notes():
        console.print(line, markup=False)
    pc = per_class(connect(store, ["eval_scores"]))
    if pc is not None:
        _print(
            pc.headers,
            pc.rows,
            "Per-class accuracy (%): reals and the fakes of each generator family, "
            "[95 % bootstrap interval] (n)",
            left=3,
        )
    _holdout_note(store)
    ag = gold_agreement(store)
    if ag is not None:
        console.print(agreement_line(ag), markup=False)
    rb = robustness(connect(store, ["eval_scores"]))
    if rb is not None:
        _print(
            rb.headers,
            rb.rows,
            "Robustness: accuracy and F1 (%) per variant and perturbation, [95 % interval]",
            left=5,
        )


def _holdout_note(store) -> None:
    """One sentence when the held-out families left fewer than ``intervals.min_n`` OOD items
    in test (from the splits footers, forenset.funnel): why the OOD set is small or empty."""
    from forenset.funnel import holdout_warnings

    for line in holdout_warnings(store):
        console.print(line, markup=False)


def _print(headers: list[str], rows: list[list[str]], title: str, left: int) -> None:
    """A Rich table: the first ``left`` columns (the group) left-aligned, the numbers right."""
    table = Table(title=title)
    for i, col in enumerate(headers):
        table.add_column(col, justify="left" if i < left else "right")
    for row in rows:
        table.add_row(*row)
    # piped to a file, a wide table keeps one line per row (cells hold intervals and caveats)
    (console if console.is_terminal else Console(width=400)).print(table)


@app.command("export-gold")
def export_gold_(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    out: Annotated[
        Path | None, typer.Option(help="Export folder (default: <run>/exports/labelstudio-gold).")
    ] = None,
    n: Annotated[int, typer.Option(min=0, help="Tasks for one annotator each.")] = 2000,
    overlap: Annotated[int, typer.Option(min=0, help="Overlap tasks (every annotator).")] = 10,
    split: Annotated[
        str, typer.Option(help="Split of the fakes (train|validation|test|all).")
    ] = "test",
    seed: Annotated[int | None, typer.Option(help="Draw seed (default: the build seed).")] = None,
) -> None:
    """Label Studio task for human gold explanations of fake+real pairs (XPlainVerse §4)."""
    from forenset.benchmarks.evaluation.gold import export_gold
    from forenset.exports.api import build_seed
    from forenset.exports.data import default_out, load_samples

    store = open_run(run_dir)
    if not store.manifest("splits"):
        fail(f"{run_dir} has no splits yet: run `forenset build` first")
    try:
        dest = out or default_out(store, "labelstudio-gold")
    except ValueError as e:
        fail(str(e))
    res = export_gold(
        store,
        load_samples(store),
        Path(dest),
        n=n,
        overlap=overlap,
        seed=build_seed(store) if seed is None else seed,
        split=None if split == "all" else split,
    )
    console.print_json(json.dumps(res))


@app.command("import-gold")
def import_gold_(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    export_json: Annotated[Path, typer.Argument(help="Label Studio JSON export of the gold task.")],
    append: Annotated[bool, typer.Option(help="Keep earlier gold imports.")] = False,
    evaluator: Annotated[
        Path | None,
        typer.Option(help="YAML of an llm: pool (LLMSettings) for the agreement's evaluator."),
    ] = None,
) -> None:
    """Store human gold explanations as the gold_references table; print each problem class
    with its count and the inter-annotator agreement (EntityScore / EvidenceScore by the
    --evaluator model, else by the offline phrase matcher)."""
    from forenset.benchmarks.evaluation.gold import import_gold
    from forenset.benchmarks.evaluation.report import gold_agreement
    from forenset.exports.labelstudio import AnnotationImportError

    if not export_json.exists():
        fail(f"{export_json} does not exist")
    if export_json.suffix.lower() == ".jsonl":  # Label Studio exports JSON, XDD references JSONL
        fail(f"{export_json} is JSONL, not a Label Studio JSON export; an XDD challenge "
             f"reference is imported with `forenset xdd-import-gold {run_dir} {export_json}`")  # fmt: skip
    store = open_run(run_dir)
    try:
        info, problems = import_gold(store, export_json, append=append)
    except AnnotationImportError as e:
        fail(str(e))
    ev = None
    if evaluator is not None:
        from pydantic import ValidationError

        from forenset.backends.llm.cache import ResponseCache
        from forenset.backends.llm.types import LLMSettings
        from forenset.benchmarks.common.scorers.entity_evidence import ModelEntityEvidenceEvaluator
        from forenset.exports.api import build_seed

        try:
            settings = LLMSettings.model_validate(read_yaml(evaluator, "--evaluator"))
        except ValidationError as e:
            fail(f"--evaluator {evaluator}: {str(e).splitlines()[0]}")
        ev = ModelEntityEvidenceEvaluator(
            settings,
            build_seed=build_seed(store),
            stage="gold_agreement",
            cache=ResponseCache(store.fs, store.root),
        )
    ag = gold_agreement(store, ev)
    res = {"path": info.path, "rows": info.rows, "counts": info.counts}
    res |= {"problems": list(problems.values()), "agreement": ag.row() if ag else None}
    console.print_json(json.dumps(res))
