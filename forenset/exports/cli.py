"""Typer commands the main CLI mounts at top level: export, import-annotations, report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Exports and the dataset report."
)


def _fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _store(run_dir: str):
    from forenset.store.run_store import RunStore

    if "://" not in run_dir and not Path(run_dir).exists():
        _fail(f"run directory {run_dir} does not exist")
    store = RunStore(run_dir)
    if not store.manifest("splits"):
        _fail(f"run directory {run_dir} has no splits yet: run `forenset build` first")
    return store


@app.command("export")
def export_cmd(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    format: Annotated[
        str, typer.Option("--format", "-f", help="hf | sft | fakebench | labelstudio")
    ],
    out: Annotated[
        Path | None, typer.Option("--out", help="Export folder (default: <run>/exports/<format>).")
    ] = None,
    eval_subset: Annotated[
        str | None,
        typer.Option("--eval-subset", help="N:M = N fakes + M reals per split (all if fewer)."),
    ] = None,
    balanced: Annotated[
        bool, typer.Option("--balanced", help="SFT: as many reals as fakes per split.")
    ] = False,
    seed: Annotated[
        int | None, typer.Option(help="Sampling seed (default: the build seed).")
    ] = None,
) -> None:
    """Export the dataset in one format, reading the stage tables of RUN_DIR."""
    from pydantic import ValidationError

    from forenset.exports.api import run_export
    from forenset.exports.settings import ExportSettings

    try:
        st = ExportSettings(eval_subset=eval_subset, balanced=balanced, seed=seed)
    except ValidationError:
        _fail(f"--eval-subset must look like N_FAKE:M_REAL (got {eval_subset!r})")
    store = _store(run_dir)
    try:
        res = run_export(store, format, out, st)
    except ValueError as e:
        _fail(str(e))
    typer.echo(json.dumps({k: res[k] for k in ("format", "path", "samples", "counts")}))


@app.command("import-annotations")
def import_annotations_cmd(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    export_json: Annotated[Path, typer.Argument(help="A Label Studio JSON export.")],
    append: Annotated[
        bool, typer.Option("--append", help="Keep earlier imports in the annotations table.")
    ] = False,
) -> None:
    """Store a completed Label Studio export as the `annotations` table of RUN_DIR."""
    from forenset.exports.labelstudio import AnnotationImportError, import_annotations

    if not export_json.exists():
        _fail(f"{export_json} does not exist")
    store = _store(run_dir)
    try:
        info = import_annotations(store, export_json, append=append)
    except AnnotationImportError as e:
        _fail(str(e))
    typer.echo(json.dumps({"path": info.path, "rows": info.rows, "counts": info.counts}))


@app.command("report")
def report_cmd(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    out: Annotated[
        Path | None, typer.Option("--out", help="HTML file (default: <run>/report.html).")
    ] = None,
    gallery: Annotated[int, typer.Option(help="Samples shown in the gallery.")] = 4,
) -> None:
    """Write a self-contained HTML report of the dataset (plots and images embedded)."""
    from forenset.report.html import write_report

    store = _store(run_dir)
    if out is None and not store.is_local:
        _fail("the run directory is remote: pass --out")
    path = write_report(store, out or Path(store.path("report.html")), gallery=gallery)
    typer.echo(str(path))


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
) -> None:
    """FakeBench items (FakeClass, FakeClue, FakeQA) as an HF dataset, one config per task."""
    from forenset.exports.data import default_out
    from forenset.exports.fakebench_bench import export_clue_task, export_fakebench_bench

    store = _store(run_dir)
    try:
        dest = out or default_out(store, "fakebench-bench")
        res = export_fakebench_bench(store, dest)
        if labelstudio:
            res["labelstudio"] = export_clue_task(store, dest / "labelstudio")["counts"]
    except ValueError as e:
        _fail(str(e))
    typer.echo(json.dumps(res))
