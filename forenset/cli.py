"""The forenset command line: build, status, query."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Build datasets for explainable AI-generated image detection.",
)
console = Console(width=None if sys.stdout.isatty() else 150)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 150)


def fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def _arm_force_quit(progress: Progress, run_uri: str) -> None:
    """Make the next Ctrl-C end the process at once instead of waiting for running shards.

    Safe by construction: a shard becomes visible only through an atomic rename, so shards
    still running are simply not there; resume sweeps their temporaries and takes over the
    lock of a dead process, and the watchdog stops Prefect's ephemeral server. The flow run is
    left as a killed one would be."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread

    def quit_now(signum: int, frame: object) -> None:
        progress.stop()  # restores the terminal's cursor
        try:  # best effort: status should not say "running" for a build that is gone
            from forenset.store.run_store import RunStore

            store = RunStore(run_uri)
            state = store.read_json("state.json", default={}) or {}
            store.write_json("state.json", {**state, "status": "interrupted"})
            store.release_lock(all_levels=True)  # another host may build here next
        except Exception:  # noqa: BLE001, S110 - exiting anyway; resume copes with either
            pass
        err.print(
            f"[bold red]error:[/] build stopped without waiting: shards that were running are "
            f"not committed, committed shards in {run_uri} are kept; run the same command to resume"
        )
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)

    signal.signal(signal.SIGINT, quit_now)


def _quiet_prefect() -> None:
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


def _nothing_to_do(run_uri: str, cfg, retry_errors: bool) -> int | None:
    """Shards of an up-to-date build whose export is current too, else None (then the real
    build runs). Prefect-free, so a no-op rerun starts no API server and imports no flow."""
    from forenset.exports.dataset import export_up_to_date
    from forenset.scheduler import shards_up_to_date
    from forenset.store.run_store import RunStore
    from forenset.tasks.base import StageContext

    try:
        store = RunStore(run_uri)
        if not store.exists("state.json"):
            return None
        n = shards_up_to_date(StageContext(store, cfg), retry_errors=retry_errors)
        return n if n is not None and export_up_to_date(store, cfg.export) else None
    except Exception:  # noqa: BLE001 - any doubt: the real build decides (and reports)
        return None


@app.command()
def build(
    config: Annotated[
        Path | None, typer.Argument(help="Build config YAML (default: forenset/data/demo.yaml).")
    ] = None,
    run_dir: Annotated[
        str | None, typer.Option("--run-dir", help="Run directory or fsspec URI.")
    ] = None,
    retry_errors: Annotated[
        bool, typer.Option(help="Also retry rows that failed terminally.")
    ] = False,
) -> None:
    """Run the build DAG (resumes: finished shards are skipped)."""
    _quiet_prefect()
    from forenset.config import ConfigError, load_config
    from forenset.store.run_store import RunLockedError

    try:
        cfg = load_config(config)
    except ConfigError as e:
        fail(str(e))
    run_uri = run_dir or cfg.run_dir
    from forenset.store.storage import use_storage

    use_storage(cfg.storage)  # every store of this process, and the workers it starts, use it
    n = _nothing_to_do(run_uri, cfg, retry_errors)
    if n is not None:  # decided before Prefect is imported: no server, no flow run
        console.print(f"Nothing to do: all {n} shards are up to date ({run_uri}).")
        return
    from forenset.flows.build import run_build
    from forenset.scheduler import BuildFailed, BuildInterrupted
    from forenset.stages import stage_names

    t0 = time.perf_counter()
    with Progress(
        TextColumn("{task.description:<14}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[note]}"),
        TimeElapsedColumn(),
        console=console,
        disable=not console.is_terminal,
    ) as progress:
        bars = {name: progress.add_task(name, total=0, note="") for name in stage_names()}

        def on_event(kind: str, stage: str, st) -> None:
            progress.update(
                bars[stage],
                total=st.planned,
                completed=st.run + st.skipped + st.failed,
                note=f"{st.ok} ok {st.error} err" + (f" {st.failed} FAILED" if st.failed else ""),
            )

        def on_interrupt() -> None:
            err.print(
                "stopping: no new shards start, the running ones finish and commit "
                "(Ctrl-C again to quit at once)"
            )
            _arm_force_quit(progress, run_uri)

        try:
            result = run_build(
                run_uri,
                cfg,
                retry_errors=retry_errors,
                on_event=on_event,
                on_interrupt=on_interrupt,
            )
        except RunLockedError as e:
            fail(str(e))
        except (PermissionError, OSError) as e:
            fail(f"cannot write to run directory {run_uri}: {e.strerror or e}")
        except BuildInterrupted as e:  # running shards committed; nothing partial is visible
            fail(f"{e} (run directory {run_uri})", code=130)
        except BuildFailed as e:  # a configuration problem every shard of a stage would hit
            fail(f"build stopped: {e}", code=1)
        except KeyboardInterrupt:  # Ctrl-C before the flow started, or outside the main thread
            fail(
                f"build interrupted: committed shards in {run_uri} are kept; "
                "run the same command to resume",
                code=130,
            )
    stats = result["stages"]
    table = Table(title=f"forenset build — {run_uri}")
    for col in (
        "stage",
        "shards",
        "run",
        "skipped",
        "failed",
        "rows",
        "ok",
        "error",
        "kept",
        "discarded",
        "seconds",
    ):
        table.add_column(col, justify="left" if col == "stage" else "right")
    for name, s in stats.items():
        table.add_row(
            name,
            str(s["planned"]),
            str(s["run"]),
            str(s["skipped"]),
            str(s["failed"]),
            str(s["rows"]),
            str(s["ok"]),
            str(s["error"]),
            str(s["kept"]) if name == "verdicts" else "",
            str(s["discarded"]) if name == "verdicts" else "",
            f"{s['seconds']:.1f}",
        )
    console.print(table)
    ran = sum(s["run"] for s in stats.values())
    exp = result["export"]
    if ran == 0 and exp.get("skipped"):
        console.print(
            f"Nothing to do: all {sum(s['planned'] for s in stats.values())} shards are up to date."
        )
    elif ran:
        console.print(f"Ran {ran} shards in {result['tasks']} Prefect tasks.")
    console.print(f"Export: {exp['path']} {exp['counts']}  ({time.perf_counter() - t0:.1f}s)")
    failures = [f for s in stats.values() for f in s["failures"]]
    if failures:
        for f in failures[:10]:
            err.print(f"[red]failed shard[/] {f}")
        raise typer.Exit(1)


@app.command()
def split(
    run_dir: Annotated[
        str, typer.Argument(help="A built run directory (its saved config.yaml is reused).")
    ],
    holdout: Annotated[
        str | None, typer.Option(help="Comma-separated generator families seen only in test.")
    ] = None,
    fractions: Annotated[
        str | None, typer.Option(help="e.g. train=0.7,validation=0.15,test=0.15")
    ] = None,
) -> None:
    """Regenerate splits: only splits and later stages recompute (candidates are untouched)."""
    _quiet_prefect()
    import yaml

    from forenset.config import ConfigError, validate_config

    store = _open(run_dir)
    if not store.exists("config.yaml"):
        fail(f"{run_dir} has no config.yaml: build it first")
    data = yaml.safe_load(store.read_bytes("config.yaml"))
    sp = data.setdefault("splits", {})
    if holdout is not None:
        sp["holdout_families"] = [h.strip() for h in holdout.split(",") if h.strip()]
    if fractions is not None:
        try:
            sp["fractions"] = {
                k.strip(): float(v) for k, v in (p.split("=") for p in fractions.split(","))
            }
        except ValueError:
            fail("--fractions must look like train=0.7,validation=0.15,test=0.15")
    try:
        cfg = validate_config(data, f"{run_dir}/config.yaml")
    except ConfigError as e:
        fail(str(e))
    known = {g.family for g in cfg.generators}
    unknown = set(cfg.splits.holdout_families) - known
    if unknown:
        fail(
            f"unknown generator famil{'y' if len(unknown) == 1 else 'ies'} {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})"
        )
    from forenset.flows.build import run_build

    result = run_build(run_dir, cfg)
    ran = {k: v["run"] for k, v in result["stages"].items() if v["run"]}
    console.print(
        f"Splits regenerated: holdout={cfg.splits.holdout_families} fractions={dict(cfg.splits.fractions)}"
    )
    console.print(f"Shards recomputed: {ran or 'none'}; export {result['export']['counts']}")


@app.command()
def status(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    details: Annotated[
        bool, typer.Option("--details", help="Also Edit-Check and split statistics (SQL).")
    ] = False,
) -> None:
    """Per stage: shards done/pending, rows ok/error, kept/discarded (from shard footers, no data scan)."""
    store = _open(run_dir)
    state = store.read_json("state.json", default={}) or {}
    # stage names in DAG order from the build's own record: status imports no stage code
    names = state.get("order") or list(state.get("stages", {})) or store.stages_present()
    console.print(f"{run_dir}: build {state.get('status', 'never run')}")
    table = Table()
    for col in ("stage", "shards done", "pending", "rows", "ok", "error", "kept", "discarded"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    for name in names:
        shards = store.manifest(name)
        st = state.get("stages", {}).get(name, {})
        pending = (
            max(0, st.get("planned", 0) - st.get("done", 0))
            if state.get("status") != "complete"
            else 0
        )
        c = {
            k: sum(x.counts.get(k, 0) for x in shards) for k in ("ok", "error", "kept", "discarded")
        }
        table.add_row(
            name,
            str(len(shards)),
            str(pending),
            str(sum(x.rows for x in shards)),
            str(c["ok"]),
            str(c["error"]),
            str(c["kept"]) if name == "verdicts" else "",
            str(c["discarded"]) if name == "verdicts" else "",
        )
    console.print(table)
    if "verdicts" in names:
        from forenset.stats import discard_line

        vc = [x.counts for x in store.manifest("verdicts")]
        console.print(
            discard_line(sum(c.get("kept", 0) for c in vc), sum(c.get("discarded", 0) for c in vc))
        )
    if details:
        from forenset import stats as st_mod
        from forenset.store.views import connect, table_names

        con = connect(store, table_names(store))
        for name in st_mod.QUERIES:
            cols, rows = st_mod.run(con, name)
            t = Table(title=name.replace("_", " "))
            for c in cols:
                t.add_column(c)
            for r in rows:
                t.add_row(*["" if v is None else str(v) for v in r])
            console.print(t)


@app.command("eval")
def eval_(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
) -> None:
    """Table 5: detection F1 on the ID and OOD sets and explanation scores, per detector and
    track (from the eval_scores table; explanation cells read ID / OOD)."""
    store = _open(run_dir)
    if not store.manifest("eval_scores"):
        fail(
            f"{run_dir} has no eval_scores: build it with evaluation.enabled and a detector",
            code=1,
        )
    from forenset.report.evaluation import DASH, HEADERS, table5
    from forenset.store.views import connect

    t5 = table5(connect(store, ["eval_scores"]))
    if t5 is None:
        fail(f"{run_dir} has an eval_scores table without scores of a whole set", code=1)
    table = Table(title="Detection F1 (%) and explanation scores (ID / OOD)")
    for col in HEADERS:
        table.add_column(col, justify="left" if col in ("detector", "track") else "right")
    for row in t5.rows:
        table.add_row(*row)
    console.print(table)
    if t5.models:
        console.print("models: " + "; ".join(t5.models))
    for (header, why), where in t5.reasons.items():
        console.print(f"{DASH} {header}: {why} ({', '.join(where)})")
    from forenset.report.evaluation import (
        ROBUST_HEADERS,
        agreement_line,
        gold_agreement,
        robustness,
    )

    ag = gold_agreement(store)
    if ag is not None:
        console.print(agreement_line(ag), markup=False)
    rb = robustness(connect(store, ["eval_scores"]))
    if rb is not None:
        table = Table(title="Robustness: accuracy and F1 (%) per variant and perturbation")
        for col in ROBUST_HEADERS:
            table.add_column(col, justify="right" if col in ROBUST_HEADERS[5:] else "left")
        for row in rb.rows:
            table.add_row(*row)
        console.print(table)


def _open(run_dir: str):
    from forenset.store.run_store import RunStore

    if "://" not in run_dir and not Path(run_dir).exists():
        fail(f"run directory {run_dir} does not exist")
    return RunStore(run_dir)


@app.command()
def query(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    sql: Annotated[
        str, typer.Argument(help="SQL over the stage views (sources, captions, ..., explanations).")
    ],
    format: Annotated[str, typer.Option("--format", "-f", help="table | csv | json")] = "table",
    limit: Annotated[int, typer.Option(help="Rows shown in table format.")] = 50,
) -> None:
    """Run SQL over the stage tables with DuckDB."""
    import duckdb

    from forenset.store.views import connect, table_names

    if format not in ("table", "csv", "json"):
        fail("--format must be one of table, csv, json")
    store = _open(run_dir)
    con = connect(store, table_names(store))
    try:
        cur = con.execute(sql)
    except duckdb.Error as e:
        fail(f"query failed: {str(e).splitlines()[0]}")
    cols = [d[0] for d in cur.description]
    rows = cur.fetchall()
    if format == "json":
        sys.stdout.write(
            json.dumps([dict(zip(cols, r, strict=True)) for r in rows], default=str, indent=1)
            + "\n"
        )
    elif format == "csv":
        import csv

        w = csv.writer(sys.stdout)
        w.writerow(cols)
        w.writerows(rows)
    else:
        t = Table(show_lines=False)
        for c in cols:
            t.add_column(c, overflow="fold")
        for r in rows[:limit]:
            t.add_row(*["" if v is None else str(v)[:200] for v in r])
        console.print(t)
        if len(rows) > limit:
            console.print(f"({len(rows)} rows, {limit} shown; use --limit or --format csv)")


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
    from forenset.exports.api import build_seed
    from forenset.exports.data import default_out, load_samples
    from forenset.exports.labelstudio_gold import export_gold

    store = _open(run_dir)
    if not store.manifest("splits"):
        fail(f"{run_dir} has no splits yet: run `forenset build` first", code=1)
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
    """Store human gold explanations as ``gold_references``; print each problem class with its
    count and the inter-annotator agreement (EntityScore / EvidenceScore by the ``--evaluator``
    model, else by the offline phrase matcher)."""
    from forenset.exports.labelstudio import AnnotationImportError
    from forenset.exports.labelstudio_gold import import_gold
    from forenset.report.evaluation import gold_agreement

    if not export_json.exists():
        fail(f"{export_json} does not exist")
    store = _open(run_dir)
    try:
        info, problems = import_gold(store, export_json, append=append)
    except AnnotationImportError as e:
        fail(str(e))
    ev = None
    if evaluator is not None:
        import yaml

        from forenset.backends.llm.cache import ResponseCache
        from forenset.backends.llm.types import LLMSettings
        from forenset.backends.scorers.entity_evidence import ModelEntityEvidenceEvaluator
        from forenset.exports.api import build_seed

        settings = LLMSettings.model_validate(yaml.safe_load(evaluator.read_text()))
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


@app.command("reward")
def reward(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    label_studio: Annotated[
        Path | None, typer.Option(help="Also write the Label Studio triplet task here.")
    ] = None,
    hf: Annotated[
        Path | None, typer.Option(help="Also write the triplets + labels as an HF dataset here.")
    ] = None,
) -> None:
    """The reward benchmark (XAIGID-RewardBench): policy accuracy (Tables 1-2), policy Elo
    (Tables 3/5), judges' Acc(4)/Acc(2) (Table 4), agreement and tied triplets."""
    store = _open(run_dir)
    if not store.manifest("reward_scores"):
        fail(f"{run_dir} has no reward_scores: build it with reward.enabled", code=1)
    from forenset.report.reward import reward_tables
    from forenset.store.views import connect

    got = reward_tables(connect(store, ["reward_scores", "reward_labels"]))
    for t in got.tables:
        table = Table(title=t.title)
        for i, col in enumerate(t.headers):
            table.add_column(col, justify="left" if i < 2 else "right")
        for row in t.rows:
            table.add_row(*row)
        console.print(table)
    for note in got.notes:
        console.print(note)
    if got.ties:
        console.print(
            f"{len(got.ties)} tied triplet(s) to resolve (reward.labels.resolutions): "
            + ", ".join(got.ties)
        )
    if label_studio is not None or hf is not None:
        from forenset.exports.reward import export_reward_hf, label_studio_tasks

        if label_studio is not None:
            done = label_studio_tasks(store, label_studio)
            console.print(f"label studio: {done['tasks']} tasks in {label_studio}")
        if hf is not None:
            done = export_reward_hf(store, hf)
            console.print(f"hf dataset: {done['triplets']} triplets in {hf}")


@app.command("fakebench")
def fakebench(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
) -> None:
    """FakeBench: FakeClass accuracy, FakeClue and FakeQA scores per evaluated model (from the
    fakebench_scores table)."""
    store = _open(run_dir)
    if not store.manifest("fakebench_scores"):
        fail(
            f"{run_dir} has no fakebench_scores: build it with fakebench.enabled and a model",
            code=1,
        )
    from forenset.report.fakebench import (
        CLASS_HEADERS,
        CLUE_HEADERS,
        DASH,
        TEXT_HEADERS,
        fakebench_tables,
    )
    from forenset.store.views import connect

    t = fakebench_tables(connect(store, ["fakebench_scores"]))
    if t is None:
        fail(f"{run_dir} has a fakebench_scores table without ok rows", code=1)
    for title, headers, rows in (
        ("FakeClass: accuracy (%)", CLASS_HEADERS, t.fakeclass),
        ("FakeClue (inference / fault-finding mode)", CLUE_HEADERS, t.fakeclue),
        ("FakeQA (free mode)", TEXT_HEADERS, t.fakeqa),
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


def _mount_subapps() -> None:
    from forenset.exports.cli import app as exports_app
    from forenset.perturbations.cli import app as perturb_app

    app.add_typer(
        perturb_app,
        name="perturb",
        help="Perturbation catalogue: preview, propagate, summary, train-uap.",
    )
    app.add_typer(exports_app)  # export, import-annotations, report at top level


CORE_COMMANDS = {"build", "status", "query", "split", "eval", "reward"}


def main() -> None:
    # the sub-apps import the perturbation catalogue and exporters (~0.5 s): only when needed
    if len(sys.argv) < 2 or sys.argv[1] not in CORE_COMMANDS:
        _mount_subapps()
    app()


if __name__ == "__main__":
    main()
