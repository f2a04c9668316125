"""The forenset command line: build, status, query."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

# status/query/export on s3:// (forenset.store.storage.use_endpoint)
ENDPOINT_HELP = (
    "S3-compatible endpoint of an s3:// run directory (default: AWS_ENDPOINT_URL or "
    "FORENSET_STORAGE; keys from AWS_* or a profile)."
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Build datasets for explainable AI-generated image detection.",
)
console = Console(width=None if sys.stdout.isatty() else 150)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 150)


def _version(value: bool) -> None:
    if value:
        from forenset import __version__

        console.print(f"forenset {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Build datasets for explainable AI-generated image detection."""


def fail(message: str, code: int = 2) -> NoReturn:
    from rich.markup import escape

    from forenset.errors import clip

    # a 5 MB id is not echoed whole; "forenset[gcs]" is no markup
    err.print(f"[bold red]error:[/] {escape(clip(message, 2000))}")
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


def stage_tables(
    out: Console, columns: tuple[str, ...], rows: list[list[str]], title: str | None = None
) -> list[Table]:
    """The stage table as one Rich table when it fits ``out``'s width, else stacked: several
    tables, each repeating the stage column, so that no stage name and no number is cut."""
    from rich import box
    from rich.measure import Measurement

    def make(cols: list[int], with_title: bool) -> Table:
        t = Table(title=title if with_title else None, box=box.SIMPLE_HEAD, pad_edge=False)
        for i in cols:
            t.add_column(columns[i], justify="left" if i == 0 else "right", no_wrap=True)
        for r in rows:
            t.add_row(*(r[i] for i in cols))
        return t

    def width(cols: list[int]) -> int:
        wide = out.options.update_width(10_000)
        return Measurement.get(out, wide, make(cols, False)).maximum

    groups: list[list[int]] = [[0]]
    for i in range(1, len(columns)):
        if len(groups[-1]) > 1 and width([*groups[-1], i]) > out.width:
            groups.append([0])
        groups[-1].append(i)
    return [make(g, k == 0) for k, g in enumerate(groups)]


BUILD_COLUMNS = (
    "stage", "shards", "run", "skipped", "failed", "rows", "ok", "error", "kept", "discarded",
    "seconds",
)  # fmt: skip


def print_build_summary(out: Console, stats: dict[str, dict], run_uri: str) -> None:
    """The per-stage table of a build (stacked where ``out`` is narrow); stages with nothing
    planned and no rows folded into one line each ("12 benchmark stages not enabled")."""
    from forenset.stages import fold_idle, gate_names

    gates = set(gate_names())  # the stages that keep or discard candidates (Stage.gate)
    idle = {n for n, s in stats.items() if not s["planned"] and not s["rows"]}
    complete = not any(s["failed"] for s in stats.values())
    shown, folded = fold_idle(list(stats), idle, complete)
    rows = [
        [
            name,
            str(s["planned"]),
            str(s["run"]),
            str(s["skipped"]),
            str(s["failed"]),
            str(s["rows"]),
            str(s["ok"]),
            str(s["error"]),
            str(s["kept"]) if name in gates else "",
            str(s["discarded"]) if name in gates else "",
            f"{s['seconds']:.1f}",
        ]
        for name, s in ((n, stats[n]) for n in shown)
    ]
    title = f"forenset build — {run_uri}"
    for table in stage_tables(out, BUILD_COLUMNS, rows, title):
        out.print(table)
    for line in folded:
        out.print(line)


def export_line(run_uri: str, exp: dict, seconds: float | None = None) -> str:
    """``Export: <run dir as given, scheme kept>/exports/parquet: train 12, validation 3, ...``"""
    where = f"{run_uri.rstrip('/')}/exports/parquet"
    counts = ", ".join(f"{k} {v}" for k, v in (exp.get("counts") or {}).items()) or "no rows"
    partial = " (partial)" if exp.get("partial") else ""
    took = "" if seconds is None else f" ({seconds:.1f}s)"
    return f"Export: {where}{partial}: {counts}{took}"


def _exit_on_sigint(code: int) -> None:
    """From here on a Ctrl-C ends the process with ``code``, the exit code of the build's final
    state (state.json is written, the export too): an interrupt while the summary prints or
    Prefect shuts down must not turn a complete build into exit 130. The ephemeral API server
    is stopped by its watchdog when this process ends (forenset.flows.ephemeral)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def done(signum: int, frame: object) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    signal.signal(signal.SIGINT, done)


def _completed_anyway(run_uri: str, cfg, retry_errors: bool) -> None:
    """A Ctrl-C that arrived once every shard and the export were done (the flow run was
    still closing): the build is complete, so say so and exit 0, as ``status`` will."""
    n = _nothing_to_do(run_uri, cfg, retry_errors)
    if n is not None:
        console.print(
            f"Interrupted after the build completed: all {n} shards and the export are up to "
            f"date ({run_uri})."
        )
        raise typer.Exit(0)


def _progress_every_s() -> float:
    """Seconds between progress lines when output is not a terminal (and in the run log)."""
    try:
        return max(0.5, float(os.environ.get("FORENSET_PROGRESS_SECONDS", "30")))
    except ValueError:
        return 30.0


def _quiet_prefect() -> None:
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    one_message_per_event()


class _FinalStateEcho:
    """A logging filter: drops Prefect's ``Finished in state Failed(...)`` / ``Cancelled(...)``
    lines of flow and task runs. The CLI reports how a build ended in its own sentence (what
    to fix, exit code), so Prefect's copy of the same message would only say it twice."""

    def filter(self, record: object) -> bool:
        import logging

        assert isinstance(record, logging.LogRecord)
        return not (
            record.levelno >= logging.ERROR and str(record.msg).startswith("Finished in state ")
        )


def one_message_per_event() -> None:
    """Install :class:`_FinalStateEcho` on Prefect's flow-run and task-run loggers (once)."""
    import logging

    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _FinalStateEcho) for f in logger.filters):
            logger.addFilter(_FinalStateEcho())


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
    from forenset.errors import RunnerUnavailable
    from forenset.store.run_store import RunLockedError
    from forenset.store.storage import StorageError

    try:
        cfg = load_config(config)
    except ConfigError as e:
        fail(str(e))
    from forenset.redact import install_log_redaction, remember_config

    remember_config(cfg)  # the keys the config names never reach the log (forenset.redact)
    install_log_redaction()
    run_uri = run_dir or cfg.run_dir
    from forenset.store.storage import use_storage

    use_storage(cfg.storage)  # every store of this process, and the workers it starts, use it
    n = _nothing_to_do(run_uri, cfg, retry_errors)
    if n is not None:  # decided before Prefect is imported: no server, no flow run
        console.print(f"Nothing to do: all {n} shards are up to date ({run_uri}).")
        return
    from forenset.flows.build import run_build
    from forenset.scheduler import BuildFailed, BuildInterrupted, progress_line
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

        def on_progress(stats) -> None:  # piped output (nohup, CI, a worker's log): one line
            if not console.is_terminal:
                print(f"progress: {progress_line(stats, time.perf_counter() - t0)}", flush=True)

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
                on_progress=on_progress,
                progress_every_s=_progress_every_s(),
            )
        except RunLockedError as e:
            fail(str(e))
        except RunnerUnavailable as e:  # a cluster that is down or refuses us: not the run dir
            fail(str(e))
        except StorageError as e:  # endpoint down, driver missing, credentials in the URI
            fail(str(e), code=1)
        except (PermissionError, OSError) as e:
            where = f" ({e.filename})" if getattr(e, "filename", None) else ""
            fail(f"cannot write to run directory {run_uri}{where}: {e.strerror or e}")
        except BuildInterrupted as e:  # running shards committed; nothing partial is visible
            _completed_anyway(run_uri, cfg, retry_errors)
            fail(f"{e} (run directory {run_uri})", code=130)
        except BuildFailed as e:  # a configuration problem every shard of a stage would hit
            fail(f"build stopped: {e}", code=1)
        except KeyboardInterrupt:  # Ctrl-C before the flow started, or outside the main thread
            _completed_anyway(run_uri, cfg, retry_errors)
            fail(
                f"build interrupted: committed shards in {run_uri} are kept; "
                "run the same command to resume",
                code=130,
            )
    stats = result["stages"]
    failures = [f for s in stats.values() for f in s["failures"]]
    _exit_on_sigint(1 if failures else 0)  # the build's state is final: Ctrl-C changes nothing
    print_build_summary(console, stats, run_uri)
    ran = sum(s["run"] for s in stats.values())
    exp = result["export"]
    if ran == 0 and exp.get("skipped"):
        console.print(
            f"Nothing to do: all {sum(s['planned'] for s in stats.values())} shards are up to date."
        )
    elif ran:
        console.print(f"Ran {ran} shards in {result['tasks']} Prefect tasks.")
    console.print(export_line(run_uri, exp, time.perf_counter() - t0))
    _build_warnings(run_uri)
    if failures:
        for f in failures[:10]:
            err.print(f"[red]failed shard[/] {f}")
        err.print(
            f"[bold red]build failed:[/] {result.get('failed') or f'{len(failures)} shards failed'}; "
            "the export is labelled partial; fix the cause and run the same command to resume"
        )
        raise typer.Exit(1)


def _build_warnings(run_uri: str) -> None:
    """The funnel's warnings under the build summary (identical generators, a small OOD set)."""
    from forenset.store.run_store import RunStore

    try:
        print_funnel(RunStore(run_uri), table=False)
    except (OSError, ValueError) as e:  # the build is done; a summary line must not fail it
        err.print(f"[yellow]warning:[/] the funnel could not be read ({e})")


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
    try:
        data = yaml.safe_load(store.read_bytes("config.yaml").decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        fail(f"{run_dir}/config.yaml is not a readable build config ({e})")
    if not isinstance(data, dict):
        fail(f"{run_dir}/config.yaml does not hold a build config (a mapping)")
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
    from forenset.config import section
    from forenset.tasks.candidates import Candidates
    from forenset.tasks.splits import Splits

    sp_cfg = section(cfg, Splits)
    known = {g.family for g in section(cfg, Candidates)}
    unknown = set(sp_cfg.holdout_families) - known
    if unknown:
        fail(
            f"unknown generator famil{'y' if len(unknown) == 1 else 'ies'} {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})"
        )
    from forenset.flows.build import run_build
    from forenset.scheduler import BuildFailed, BuildInterrupted
    from forenset.store.run_store import RunLockedError

    try:
        result = run_build(run_dir, cfg)
    except RunLockedError as e:  # a build is running on this run dir
        fail(str(e))
    except BuildInterrupted as e:
        fail(f"{e} (run directory {run_dir})", code=130)
    except BuildFailed as e:
        fail(f"split stopped: {e}", code=1)
    except OSError as e:
        fail(f"cannot write to run directory {run_dir}: {e.strerror or e}")
    ran = {k: v["run"] for k, v in result["stages"].items() if v["run"]}
    holdout_ = ", ".join(sp_cfg.holdout_families) or "none"
    fractions_ = ", ".join(f"{k} {v:g}" for k, v in sp_cfg.fractions.items())
    console.print(f"Splits regenerated: holdout {holdout_}; fractions {fractions_}")
    recomputed = ", ".join(f"{k} {v}" for k, v in ran.items()) or "none"
    console.print(f"Shards recomputed: {recomputed}")
    console.print(export_line(run_dir, result["export"]))
    _build_warnings(run_dir)


@app.command()
def status(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    details: Annotated[
        bool, typer.Option("--details", help="Also Edit-Check and split statistics (SQL).")
    ] = False,
    funnel: Annotated[
        bool,
        typer.Option("--funnel", help="Rows kept at each step, per generator and kind, and why."),
    ] = False,
    endpoint_url: Annotated[str | None, typer.Option("--endpoint-url", help=ENDPOINT_HELP)] = None,
) -> None:
    """Per stage: shards done/pending, rows ok/error, kept/discarded (from shard footers, no data scan)."""
    from forenset.store.storage import use_endpoint
    from forenset.store.views import gate_tables

    use_endpoint(endpoint_url)
    store = _open(run_dir)
    state = store.read_json("state.json", default={}) or {}
    # stage names in DAG order from the build's own record: status imports no stage code
    names = state.get("order") or list(state.get("stages", {})) or store.stages_present()
    status_ = state.get("status", "never run")
    when = ""
    if state.get("time"):
        when = f" (state written {max(0, time.time() - state['time']):.0f} s ago)"
    console.print(f"{run_dir}: build {status_}{when}")
    live = status_ != "complete"  # manifests are the last complete view; the disk is now
    if status_ == "failed":
        console.print(f"[red]why:[/] {state.get('message') or 'see the failed shards below'}")
    cols = ("stage", "shards done", "pending", "failed", "rows", "ok", "error", "kept", "discarded")
    reasons: list[str] = []
    gates = [g for g in gate_tables(store) if g in names]
    rows: list[list[str]] = []
    idle: set[str] = set()
    for name in names:
        shards = store.manifest(name)
        st = state.get("stages", {}).get(name, {})
        done = committed_shards(store, name) if live else len(shards)
        pending = max(0, st.get("planned", 0) - max(done, st.get("done", 0))) if live else 0
        reasons += st.get("failures", [])[:3] if live else []
        c = {
            k: sum(x.counts.get(k, 0) for x in shards) for k in ("ok", "error", "kept", "discarded")
        }
        n_rows = sum(x.rows for x in shards)
        if not (done or pending or n_rows or st.get("planned") or st.get("failed")):
            idle.add(name)
        rows.append(
            [
                name,
                str(done),
                str(pending),
                str(st.get("failed", 0) if live else 0),
                str(n_rows),
                str(c["ok"]),
                str(c["error"]),
                str(c["kept"]) if name in gates else "",
                str(c["discarded"]) if name in gates else "",
            ]
        )
    from forenset.stages import fold_idle

    shown, folded = fold_idle(list(names), idle, complete=not live)
    for table in stage_tables(console, cols, [r for r in rows if r[0] in shown]):
        console.print(table)
    for line in folded:
        console.print(line)
    if live and any(state.get("stages", {}).get(n, {}).get("planned") for n in names):
        console.print("rows, ok and error count the last complete build (manifests)")
    for r in reasons[:10]:
        console.print(f"[red]failed shard[/] {r}")
    for i, name in enumerate(gates):
        from forenset.stats import discard_line, gate_line

        vc = [x.counts for x in store.manifest(name)]
        kept, discarded = (sum(c.get(k, 0) for c in vc) for k in ("kept", "discarded"))
        console.print(discard_line(kept, discarded) if i == 0 else gate_line(name, kept, discarded))
    print_funnel(store, table=funnel)
    if details:
        from forenset import stats as st_mod
        from forenset.store.views import connect, table_names

        con = connect(store, table_names(store))
        for query in st_mod.QUERIES:
            q_cols, q_rows = st_mod.run(con, query)
            t = Table(title=query.replace("_", " "))
            for q_col in q_cols:
                t.add_column(q_col)
            for q_row in q_rows:
                t.add_row(*["" if v is None else str(v) for v in q_row])
            console.print(t)


def print_funnel(store, *, table: bool) -> None:
    """The funnel's warnings (identical generators, a held-out family too small), and with
    ``table`` the funnel itself (forenset.funnel: the report and the card show the same)."""
    from forenset.funnel import funnel

    f = funnel(store)
    if table:
        t = Table(title="funnel (rows kept at each step)")
        for col in ("step", "group", "n", "of", "dropped: why"):
            t.add_column(col, justify="right" if col in ("n", "of") else "left", overflow="fold")
        for step, group, n, of, why in f.numbers():
            t.add_row(step, group, str(n), "" if of is None else str(of), why)
        console.print(t, width=min(80, console.width))
    for w in f.warnings:
        console.print(f"[yellow]warning:[/] {w}")


def committed_shards(store, stage: str) -> int:
    """Shards of ``stage`` committed on disk now (a shard appears only by an atomic rename or
    PUT, so every ``.parquet`` under the stage is whole). Listing-cache free: on an object store
    another process may have committed since this filesystem instance last listed."""
    base = store.path("stages", stage)
    inv = getattr(store.fs, "invalidate_cache", None)
    if inv is not None:
        inv(base)
    try:
        return sum(1 for p in store.fs.find(base) if p.endswith(".parquet"))
    except FileNotFoundError:
        return 0


def _open(run_dir: str):
    """The run's store, or one sentence and exit 2 when ``run_dir`` is missing, a file, or a
    folder no build wrote (``status``/``query`` there would print an empty, successful run)."""
    from forenset.paths import run_dir_problem
    from forenset.store.run_store import RunStore

    problem = run_dir_problem(run_dir)
    if problem:
        fail(problem)
    return RunStore(run_dir)


@app.command()
def query(
    run_dir: Annotated[str, typer.Argument(help="Run directory or URI.")],
    sql: Annotated[
        str, typer.Argument(help="SQL over the stage views (sources, captions, ..., explanations).")
    ],
    format: Annotated[str, typer.Option("--format", "-f", help="table | csv | json")] = "table",
    limit: Annotated[int, typer.Option(help="Rows shown in table format.")] = 50,
    endpoint_url: Annotated[str | None, typer.Option("--endpoint-url", help=ENDPOINT_HELP)] = None,
) -> None:
    """Run SQL over the stage tables with DuckDB."""
    import duckdb

    from forenset.store.storage import use_endpoint
    from forenset.store.views import connect, table_names

    use_endpoint(endpoint_url)
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

        from forenset.strict import csv_safe

        w = csv.writer(sys.stdout)
        w.writerow([csv_safe(c) for c in cols])
        w.writerows([csv_safe(v) for v in r] for r in rows)
    else:
        t = Table(show_lines=False)
        for c in cols:
            t.add_column(c, overflow="fold")
        for r in rows[:limit]:
            t.add_row(*["" if v is None else str(v)[:200] for v in r])
        console.print(t)
        if len(rows) > limit:
            console.print(f"({len(rows)} rows, {limit} shown; use --limit or --format csv)")


# The benchmark families' sub-apps, mounted at top level (their commands import their code lazily).
FAMILY_APPS = (
    "forenset.benchmarks.evaluation.cli",
    "forenset.benchmarks.reward.cli",
    "forenset.benchmarks.fakebench.cli",
    "forenset.benchmarks.public.cli",
    "forenset.benchmarks.safeimg.cli",
    "forenset.benchmarks.xdd.cli",
)


def _mount_families() -> None:
    import importlib

    for module in FAMILY_APPS:
        app.add_typer(importlib.import_module(module).app)


_mount_families()


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


# Commands that only read and write the run store (no Prefect server, no build): they end with
# os._exit after flushing, so pyarrow's and DuckDB's threads cannot abort the interpreter's exit
# (``terminate called without an active exception``, exit 134; apache/arrow#34314).
FAST_EXIT = {"import-gold", "import-annotations", "export-gold", "status", "query"}


def _exit_now(code: object) -> NoReturn:
    """Flush what was printed and end the process with ``code`` (SystemExit's meaning)."""
    import logging

    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code or 0)


def main() -> None:
    # the sub-apps import the perturbation catalogue and exporters (~0.5 s): only when needed
    if len(sys.argv) < 2 or sys.argv[1] not in CORE_COMMANDS:
        _mount_subapps()
    from forenset.store.storage import StorageError

    fast = len(sys.argv) > 1 and sys.argv[1] in FAST_EXIT
    try:
        app()
    except SystemExit as done:
        if fast:
            _exit_now(done.code)
        raise
    except StorageError as e:  # the store, not the input: exit 1 (unreachable, no driver...)
        from rich.markup import escape

        from forenset.redact import redact

        err.print(f"[bold red]error:[/] {escape(redact(str(e)))}")
        if fast:
            _exit_now(1)
        sys.exit(1)
    except (OSError, UnicodeDecodeError, ValueError, RuntimeError) as e:
        # the last net under every command: bad input answers with one sentence, exit 2
        # (programming errors of other kinds still show their traceback)
        from forenset.errors import clip
        from forenset.redact import redact

        text = str(e).splitlines()[0] if str(e) else type(e).__name__
        err.print(f"[bold red]error:[/] {clip(redact(text), 2000)}")
        if fast:
            _exit_now(2)
        sys.exit(2)


if __name__ == "__main__":
    main()
