"""Typer commands the main CLI mounts at top level: export, import-annotations, report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from forenset.exports.formats import CORE_PROJECT, formats, project_names, store_formats

# status/query/export on s3:// (forenset.store.storage.use_endpoint)
ENDPOINT_HELP = (
    "S3-compatible endpoint of an s3:// run directory (default: AWS_ENDPOINT_URL or "
    "FORENSET_STORAGE; keys from AWS_* or a profile)."
)

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Exports and the dataset report."
)


def echo_fail(message: str, code: int = 2) -> None:
    """One plain-text sentence on stderr and a non-zero exit (the export commands and families)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def built_store(run_dir: str):
    """The run's store once the build has split the dataset (the export commands' check)."""
    from forenset.paths import run_dir_problem
    from forenset.store.run_store import RunStore

    problem = run_dir_problem(run_dir)  # missing, a file, a folder no build wrote
    if problem:
        echo_fail(problem)
    store = RunStore(run_dir)
    if not store.manifest("splits"):
        echo_fail(f"run directory {run_dir} has no splits yet: run `forenset build` first")
    return store


@app.command("export")
def export_cmd(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    format: Annotated[
        str, typer.Option("--format", "-f", help=" | ".join((*formats(), *store_formats())))
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
    train_fraction: Annotated[
        float | None,
        typer.Option(
            "--train-fraction",
            help="SFT: this share of the training split, half real and half fake (App. 16: 0.5).",
        ),
    ] = None,
    detector: Annotated[
        str | None,
        typer.Option(
            "--detector",
            help="Formats that read the run's tables (" + ", ".join(store_formats()) + "): "
            "the detector whose answers are written.",
        ),
    ] = None,
    endpoint_url: Annotated[str | None, typer.Option("--endpoint-url", help=ENDPOINT_HELP)] = None,
) -> None:
    """Export the dataset in one format, reading the stage tables of RUN_DIR."""
    from pydantic import ValidationError

    from forenset.store.storage import use_endpoint

    use_endpoint(endpoint_url)
    if format in store_formats():  # a family's format over the run's tables (Family.store_exports)
        from forenset.exports.data import default_out
        from forenset.families import families, load_target

        target = next(f.store_exports[format] for f in families() if format in f.store_exports)
        store = built_store(run_dir)
        try:
            res = load_target(target)(
                store, Path(out) if out else default_out(store, format), detector
            )
        except ValueError as e:
            echo_fail(str(e))
        typer.echo(json.dumps(res))
        return
    if detector is not None:
        echo_fail(f"--detector applies to --format {' | '.join(store_formats())} only")

    from forenset.exports.api import run_export
    from forenset.exports.settings import ExportSettings

    try:
        st = ExportSettings(
            eval_subset=eval_subset, balanced=balanced, seed=seed, train_fraction=train_fraction
        )
    except ValidationError as e:
        if any(err["loc"] == ("train_fraction",) for err in e.errors()):
            echo_fail(f"--train-fraction must be in (0, 1] (got {train_fraction!r})")
        echo_fail(f"--eval-subset must look like N_FAKE:M_REAL (got {eval_subset!r})")
    store = built_store(run_dir)
    try:
        res = run_export(store, format, out, st)
    except ValueError as e:
        echo_fail(str(e))
    typer.echo(json.dumps({k: res[k] for k in ("format", "path", "samples", "counts")}))


@app.command("import-annotations")
def import_annotations_cmd(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    export_json: Annotated[Path, typer.Argument(help="A Label Studio JSON export.")],
    append: Annotated[
        bool, typer.Option("--append", help="Keep earlier imports in the annotations table.")
    ] = False,
    tasks: Annotated[
        Path | None,
        typer.Option("--tasks", help="The exported task file: its tasks absent here are errors."),
    ] = None,
) -> None:
    """Store a completed Label Studio export as the `annotations` table of RUN_DIR."""
    from forenset.exports.labelstudio import AnnotationImportError, import_annotations

    if not export_json.exists():
        echo_fail(f"{export_json} does not exist")
    store = built_store(run_dir)
    try:
        info = import_annotations(store, export_json, append=append, tasks_file=tasks)
    except AnnotationImportError as e:
        echo_fail(str(e))
    typer.echo(json.dumps({"path": info.path, "rows": info.rows, "counts": info.counts}))


def _ls_token(env: str) -> str:
    import os

    token = os.environ.get(env)
    if not token:
        echo_fail(f"set {env} to a Label Studio API token (Account & Settings > Access Token)")
    return str(token)


def _ls_dir(store, out: Path | None) -> Path:
    from forenset.exports.data import default_out

    return Path(out) if out else Path(default_out(store, "labelstudio"))


@app.command("labelstudio-setup")
def labelstudio_setup_cmd(
    run_dir: Annotated[str, typer.Argument(help="Run directory (local).")],
    url: Annotated[str, typer.Option(help="Label Studio URL.")] = "http://localhost:8080",
    export_dir: Annotated[
        Path | None, typer.Option("--export-dir", help="The labelstudio export folder.")
    ] = None,
    token_env: Annotated[str, typer.Option(help="Variable holding the API token.")] = (
        "LABEL_STUDIO_API_KEY"
    ),
    projects: Annotated[
        str,
        typer.Option(
            help=f"Comma list of {', '.join(project_names())} ({CORE_PROJECT}: the triage + region pair)."
        ),
    ] = CORE_PROJECT,
    project_dir: Annotated[
        list[str] | None,
        typer.Option(
            "--project-dir",
            help="PROJECT=FOLDER: a family project's task folder (default: its export command's).",
        ),
    ] = None,
    document_root: Annotated[
        Path | None,
        typer.Option(help="LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT (default: common folder)."),
    ] = None,
) -> None:
    """Create the projects (default: the triage and region pair), each with a Local Files
    storage, and import their tasks."""
    from forenset.exports.labelstudio_api import LabelStudioError, setup_projects

    store = built_store(run_dir)
    dirs = {}
    for item in project_dir or []:
        key, sep, folder = item.partition("=")
        if not sep or not folder:
            echo_fail(f"--project-dir takes PROJECT=FOLDER (got {item!r})")
        dirs[key.strip()] = Path(folder)
    try:
        state = setup_projects(
            store,
            _ls_dir(store, export_dir),
            url,
            _ls_token(token_env),
            projects=tuple(p.strip() for p in projects.split(",") if p.strip()),
            dirs=dirs,
            document_root=document_root,
        )
    except (LabelStudioError, OSError) as e:
        echo_fail(str(e))
    typer.echo(json.dumps(state))
    typer.echo(
        "start Label Studio with LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED=true "
        f"LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT={state['document_root']}",
        err=True,
    )


@app.command("labelstudio-pull")
def labelstudio_pull_cmd(
    run_dir: Annotated[str, typer.Argument(help="Run directory (local).")],
    export_dir: Annotated[
        Path | None, typer.Option("--export-dir", help="The labelstudio export folder.")
    ] = None,
    token_env: Annotated[str, typer.Option(help="Variable holding the API token.")] = (
        "LABEL_STUDIO_API_KEY"
    ),
) -> None:
    """Import the triage and regions into RUN_DIR and push region tasks of new `ann` samples;
    download the families' project exports and print the command that reads each."""
    from forenset.exports.labelstudio import AnnotationImportError
    from forenset.exports.labelstudio_api import LabelStudioError, pull_annotations

    store = built_store(run_dir)
    try:
        res = pull_annotations(store, _ls_dir(store, export_dir), _ls_token(token_env))
    except (LabelStudioError, AnnotationImportError, OSError) as e:
        echo_fail(str(e))
    typer.echo(json.dumps(res))
    from forenset.families import families

    for key in (k for f in families() for k in f.labelstudio):  # each family's projects
        if key in res:
            typer.echo(f"next ({key}): {res[key]['next']}", err=True)


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

    store = built_store(run_dir)
    if out is None and not store.is_local:
        echo_fail("the run directory is remote: pass --out")
    path = write_report(store, out or Path(store.path("report.html")), gallery=gallery)
    typer.echo(str(path))
