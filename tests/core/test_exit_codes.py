"""README's exit codes over every command that reads a run: a run directory that does not
exist, and a run that lacks what the command reads, are input problems (exit 2, one sentence);
a config problem of `build` is one too. (Exit 1, a build failure, is checked where builds run:
tests/core/test_build_states.py; 130 in tests/core/test_cli.py.)"""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from forenset import cli

README_CODES = ("| 0 |", "| 1 |", "| 2 |", "| 130 |")


def leaf_commands() -> list[tuple[list[str], typer.core.TyperCommand]]:
    cli._mount_subapps()
    root = typer.main.get_command(cli.app)
    out = []

    def walk(cmd, path):
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        else:
            out.append((path, cmd))

    walk(root, [])
    return out


def run_commands() -> list[tuple[list[str], list[str]]]:
    """Every command whose first argument is a run directory, with placeholder later arguments
    and the options it requires."""
    found = []
    for path, cmd in leaf_commands():
        args = [p for p in cmd.params if p.param_type_name == "argument"]
        if not args or args[0].name != "run_dir":
            continue
        rest = ["SELECT 1" if a.name == "sql" else "/nonexistent/x.json" for a in args[1:]]
        if path == ["export"]:
            rest += ["--format", "hf"]
        found.append((path, rest))
    return found


COMMANDS = run_commands()


def one_sentence(output: str) -> bool:
    """One ``error: …`` message (Rich may wrap it at the console's width)."""
    text = " ".join(output.split())
    return text.startswith("error: ") and text.count("error:") == 1


# commands that read a run's committed tables and have nothing to say about an empty run
# other than what is missing; status and query describe any run, an empty one too
DESCRIBE_ANY_RUN = {("status",), ("query",)}


def test_the_codes_are_documented():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "Exit codes" in readme and all(c in readme for c in README_CODES)
    assert len(COMMANDS) >= 15, COMMANDS  # the walk finds the commands


@pytest.mark.parametrize("path, rest", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_a_missing_run_dir_is_exit_2_in_one_sentence(tmp_path, path, rest):
    res = CliRunner().invoke(cli.app, [*path, str(tmp_path / "nope"), *rest])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert one_sentence(res.output), res.output


@pytest.mark.parametrize("path, rest", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_a_run_without_what_the_command_reads_is_exit_2(tmp_path, path, rest):
    run = tmp_path / "run"
    run.mkdir()
    (run / "state.json").write_text("{}")  # a run no stage has written to
    res = CliRunner().invoke(cli.app, [*path, str(run), *rest])
    want = 0 if tuple(path) in DESCRIBE_ANY_RUN else 2
    assert res.exit_code == want, res.output
    if want:
        assert one_sentence(res.output), res.output


def test_build_config_problems_are_exit_2_with_a_hint(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("seeed: 3\n")
    res = CliRunner().invoke(cli.app, ["build", str(cfg)])
    assert res.exit_code == 2
    assert "unknown key 'seeed' (did you mean 'seed'?)" in " ".join(res.output.split())
    cfg.write_text(f"sources:\n  csv: [{tmp_path / 'photos.csv'}]\n")
    res = CliRunner().invoke(cli.app, ["build", str(cfg), "--run-dir", str(tmp_path / "r")])
    assert res.exit_code == 2
    assert f"CSV {tmp_path / 'photos.csv'} does not exist" in " ".join(res.output.split())
    assert not (tmp_path / "r").exists()  # answered before any build started
