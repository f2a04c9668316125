"""What the families' Typer sub-apps share: the consoles and one-sentence failures of the main
CLI (``fail``, Rich) and of the export commands (``echo_fail``, plain text), and opening a run."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console

console = Console(width=None if sys.stdout.isatty() else 150)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 150)


def fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def echo_fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def open_run(run_dir: str):
    """The run's store; a local run directory must exist."""
    from forenset.store.run_store import RunStore

    if "://" not in run_dir and not Path(run_dir).exists():
        fail(f"run directory {run_dir} does not exist")
    return RunStore(run_dir)


def built_store(run_dir: str):
    """The run's store once the build has split the dataset (the export commands' check)."""
    from forenset.store.run_store import RunStore

    if "://" not in run_dir and not Path(run_dir).exists():
        echo_fail(f"run directory {run_dir} does not exist")
    store = RunStore(run_dir)
    if not store.manifest("splits"):
        echo_fail(f"run directory {run_dir} has no splits yet: run `forenset build` first")
    return store
