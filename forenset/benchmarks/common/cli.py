"""What the families' Typer sub-apps share: the consoles and one-sentence failures of the main
CLI (``fail``, Rich) and of the export commands (``echo_fail``, plain text), and opening a run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console

from forenset.exports.cli import built_store, echo_fail

__all__ = ["built_store", "console", "echo_fail", "err", "fail", "open_run", "read_yaml"]

console = Console(width=None if sys.stdout.isatty() else 150)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 150)


def fail(message: str, code: int = 2) -> NoReturn:
    from forenset.errors import clip

    err.print(f"[bold red]error:[/] {clip(message, 2000)}")  # a 5 MB id is not echoed whole
    raise typer.Exit(code)


def open_run(run_dir: str):
    """The run's store, or one sentence and exit 2 when ``run_dir`` is missing, a file, or a
    folder no build wrote."""
    from forenset.paths import run_dir_problem
    from forenset.store.run_store import RunStore

    problem = run_dir_problem(run_dir)
    if problem:
        fail(problem)
    return RunStore(run_dir)


def read_yaml(path: Path, what: str):
    """A user's YAML file (an --evaluator or --judge pool) or one sentence and exit 2: not a
    regular UTF-8 file, not YAML, a repeated key."""
    import yaml

    from forenset.paths import read_text_file
    from forenset.strict import load_yaml

    try:
        return load_yaml(read_text_file(path, 16 * 1024 * 1024))
    except OSError as e:
        fail(f"{what} {path} cannot be read: {e.strerror or e}")
    except yaml.YAMLError as e:
        fail(f"{what} {path} is not valid YAML ({str(e).splitlines()[0]})")
