"""Every shell command the docs show, checked: README.md, CONTRIBUTING.md, docs/*.md,
examples/README.md (fenced ``bash`` blocks and inline ``forenset …`` / ``prefect …`` spans) and
the examples' YAML headers.

* ``forenset`` commands are parsed by the CLI's own Click parser (subcommand resolved, options
  and arguments bound, nothing invoked), so a renamed flag or command fails here, not for a
  user. A usage synopsis (``[--out PATH]``, ``hf|sft``, ``a | b``) is checked option by option.
  The ones that run offline in seconds are also run (``RUN`` below) on a small real build.
* ``prefect`` commands are parsed by Prefect's own CLI parser (cyclopts), without running.
* ``python bench/….py`` commands are parsed by the script's own argparse parser, ``python -c``
  code is compiled, ``pytest`` commands name existing paths and registered markers, ``pip
  install`` names extras that pyproject.toml defines.
* Everything else (GPU servers, Docker, a cloud or a key) must be listed in ``EXTERNAL`` with
  the reason it is not run: an unlisted program fails the test, so a new doc command is
  classified when it is written.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    ROOT / "examples" / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
]
HEADERS = sorted((ROOT / "examples").glob("*.yaml"))

# programs the docs name that no test here can run: each with why (a GPU, a daemon, a key)
EXTERNAL = {
    "docker": "needs a Docker daemon and a registry",
    "vllm": "a GPU model server (not installed; downloads weights)",
    "transformers": "`transformers serve` downloads model weights",
    "llama_cpp.server": "needs a GGUF model; run by tests/realmodels (marker realmodel)",
}
# forenset commands that run offline in seconds on a small build: really run, exit 0 expected
# (RUN_DIR-like placeholders become the build's run directory)
RUN = {"--version", "--help", "status", "query"}
PLACEHOLDER_RUNS = {"RUN", "RUN_DIR", "DIR", "runs/demo"}


@dataclass(frozen=True)
class Cmd:
    where: str  # file:line
    argv: tuple[str, ...]
    synopsis: bool  # usage line with [optional] parts or a|b alternatives


def _split_commands(text: str) -> list[list[str]]:
    """Shell words of each simple command in ``text`` (comments dropped; split at && ; | &)."""
    lex = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    lex.commenters = "#"
    out: list[list[str]] = [[]]
    for tok in lex:
        if tok and set(tok) <= set(";&|"):
            out.append([])
        else:
            out[-1].append(tok)
    return [c for c in out if c]


def _strip_prefix(argv: list[str]) -> list[str]:
    """Drop env assignments (X=1 cmd) and ``timeout N``."""
    while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", argv[0]):
        argv = argv[1:]
    if argv[:1] == ["timeout"] and len(argv) > 1:
        argv = argv[2:]
    return argv


def _synopsis_line(line: str) -> bool:
    """``[--out PATH]`` or ``a|b`` or ``a | b``: a usage line (``.[dev]``, an extra, is not)."""
    return bool(re.search(r"(^|\s)\[|\S\|\S| \| | / ", line))


def _from_line(where: str, line: str) -> list[Cmd]:
    line = line.replace("\\\n", " ")
    if _synopsis_line(line.split(" #")[0]):
        # a usage synopsis: alternatives "a | b" and "a / b" are separate commands
        body = line.split(" #")[0]
        parts = re.split(r" \| | / ", body)
        cmds = []
        for i, part in enumerate(parts):
            part = part.replace("[", " ").replace("]", " ")
            if i and not part.strip().startswith("forenset"):
                part = "forenset " + part
            words = shlex.split(part)
            # `forenset perturb preview|propagate`: one command per alternative subcommand
            alt = next((i for i in (1, 2) if i < len(words) and "|" in words[i]), None)
            if alt is None or words[alt].startswith("-"):
                cmds.append(Cmd(where, tuple(words), True))
                continue
            for name in words[alt].split("|"):
                cmds.append(Cmd(where, (*words[:alt], name, *words[alt + 1 :]), True))
        return cmds
    return [Cmd(where, tuple(_strip_prefix(c)), False) for c in _split_commands(line)]


def _fenced(path: Path) -> list[Cmd]:
    cmds: list[Cmd] = []
    lang = None
    pending = ""
    start = 0
    for n, line in enumerate(path.read_text().splitlines(), 1):
        fence = re.match(r"\s*```(\S*)", line)
        if fence:
            lang = fence.group(1) if lang is None else None
            continue
        if lang not in ("bash", "sh", "shell", "console"):
            continue
        if re.match(r"\s+\[", line) and cmds and cmds[-1].synopsis:  # a synopsis goes on
            last = cmds.pop()
            words = shlex.split(line.replace("[", " ").replace("]", " "))
            cmds.append(Cmd(last.where, last.argv + tuple(words), True))
            continue
        if not pending:
            start = n
        pending += line + "\n"
        if line.endswith("\\"):
            continue
        if pending.strip() and not pending.strip().startswith("#"):
            cmds += _from_line(f"{path.relative_to(ROOT)}:{start}", pending.rstrip("\n"))
        pending = ""
    return cmds


INLINE = re.compile(r"`((?:forenset|prefect) (?:[a-z][\w-]*|--[a-z][\w-]*)[^`]*)`")


def _inline(path: Path) -> list[Cmd]:
    cmds: list[Cmd] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        for m in INLINE.finditer(line):
            text = m.group(1)
            if "<" in text or "…" in text or "..." in text:
                continue  # a placeholder or an elided part: prose, not a command
            # prose names a command or one option of it (`forenset safeimg --simulate`): its
            # words are checked as a synopsis, and the quick ones with a run directory are run
            cmds += [
                Cmd(c.where, c.argv, True)
                for c in _from_line(f"{path.relative_to(ROOT)}:{n}", text)
            ]
    return cmds


HEADER_CMD = re.compile(r"(?<![\w./-])((?:forenset|export [A-Z_]+=)[^#]*)$")


def _header(path: Path) -> list[Cmd]:
    """Commands in the leading comment block of an example config: from ``forenset``/``export``
    to the end of the line, prose after ``, `` cut off."""
    cmds: list[Cmd] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.startswith("#"):
            break
        m = HEADER_CMD.search(line[1:])
        if m:
            text = re.split(r",\s", m.group(1))[0].rstrip(" .")
            cmds += _from_line(f"{path.relative_to(ROOT)}:{n}", text)
    return cmds


def doc_commands() -> list[Cmd]:
    cmds: list[Cmd] = []
    for path in DOCS:
        cmds += _fenced(path) + _inline(path)
    for path in HEADERS:
        cmds += _header(path)
    return cmds


COMMANDS = doc_commands()


def test_the_docs_hold_commands_to_check():
    """The extraction itself works: the commands a user meets first are among those checked."""
    found = {" ".join(c.argv) for c in COMMANDS}
    assert "forenset build" in found
    assert "pytest -q -n auto" in found  # README's test command
    assert "pip install torch==2.13.0 -e .[dev]" in found  # an extra, not a synopsis
    assert "forenset build examples/eval.yaml" in found  # an example's header
    assert any(c.argv[:2] == ("prefect", "work-pool") for c in COMMANDS)
    assert len(COMMANDS) > 60


# ---------------------------------------------------------------- forenset: Click's own parser


def _cli_root():
    """The Click command tree of ``forenset`` (Typer's own copy of Click), sub-apps mounted as
    ``main()`` mounts them before parsing."""
    import typer

    from forenset import cli

    root = typer.main.get_command(cli.app)
    if "perturb" not in root.commands:  # type: ignore[attr-defined]
        cli._mount_subapps()
        root = typer.main.get_command(cli.app)
    return root


def _resolve(argv: tuple[str, ...]):
    """(command, remaining args, its context) for ``forenset ARGV``: nothing is invoked."""
    import typer

    cmd = _cli_root()
    ctx = typer.Context(cmd, info_name="forenset")
    args = list(argv[1:])
    while hasattr(cmd, "get_command"):  # a group: the next word names the subcommand
        assert args and not args[0].startswith("-"), f"no subcommand in {argv}"
        sub = cmd.get_command(ctx, args[0])
        assert sub is not None, f"no such command: {' '.join(argv[: len(argv) - len(args) + 1])}"
        ctx = typer.Context(sub, info_name=args[0], parent=ctx)
        cmd, args = sub, args[1:]
    return cmd, args, ctx


def check_forenset(cmd: Cmd) -> None:
    if cmd.argv[1] in ("--version", "--help"):
        return  # run below
    command, args, ctx = _resolve(cmd.argv)
    if cmd.synopsis:  # every option named must exist on that command
        known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        for word in args:
            if word.startswith("--"):
                assert word.split("=")[0] in known, f"no such option {word} on {cmd.argv[:2]}"
        return
    try:
        command.make_context(ctx.info_name, list(args), parent=ctx.parent)
    except Exception as e:  # Click's UsageError: what a user would see, exit 2
        if not hasattr(e, "format_message"):
            raise
        raise AssertionError(f"`{' '.join(cmd.argv)}`: {e.format_message()}") from None


# ------------------------------------------------------------------ other programs' own parsers


def check_prefect(cmd: Cmd) -> None:
    from prefect.cli._app import _app

    try:
        _app.parse_args(list(cmd.argv[1:]), exit_on_error=False, print_error=False)
    except Exception as e:  # cyclopts' UnknownOptionError, MissingArgumentError, ...
        raise AssertionError(f"`{' '.join(cmd.argv)}`: {type(e).__name__}: {e}") from None


def _markers() -> set[str]:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {m.split(":")[0] for m in cfg["tool"]["pytest"]["ini_options"]["markers"]}


def check_pytest(args: list[str]) -> None:
    it = iter(args)
    for a in it:
        if a == "-m":
            words = set(re.findall(r"\w+", next(it))) - {"and", "or", "not"}
            assert words <= _markers(), f"unregistered markers {words - _markers()}"
        elif a == "-n":
            next(it)
        elif not a.startswith("-"):
            assert (ROOT / a.split("::")[0]).exists(), f"pytest path {a} does not exist"


def check_pip(args: list[str]) -> None:
    extras = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    for a in args:
        m = re.fullmatch(r"(?:forenset|\.|-e\s*\.)\[([\w,-]+)\]", a)
        if m:
            assert set(m.group(1).split(",")) <= extras, f"pip extra {a} not in pyproject.toml"


# one interpreter parses every script command (bench/generate.py imports torch: ~10 s a start)
SCRIPT_DRIVER = r"""
import argparse, contextlib, io, json, runpy, sys
class Parsed(Exception):
    pass
original = argparse.ArgumentParser.parse_args
def parse_args(self, args=None, namespace=None):
    original(self, args, namespace)
    raise Parsed
argparse.ArgumentParser.parse_args = parse_args
results = []
for argv in json.load(sys.stdin):
    sys.argv = argv
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(argv[0], run_name="__main__")
        results.append("the script never parsed its arguments")
    except Parsed:
        results.append("")
    except SystemExit as e:
        results.append(err.getvalue()[-800:] or f"exit {e.code}")
print(json.dumps(results))
"""
BAD_SCRIPT_ARGS = ("python", "bench/generate.py", "--sizes", "128")  # for the negative test


@functools.cache
def _script_results() -> dict[tuple[str, ...], str]:
    """Each ``python SCRIPT ARGS`` command of the docs (and BAD_SCRIPT_ARGS) parsed by the
    script's own argparse parser, nothing run past it: argv -> error text ('' when it parsed)."""
    argvs = sorted(
        {c.argv for c in COMMANDS if c.argv[0] in ("python", "python3") and c.argv[1][0] != "-"}
        | {BAD_SCRIPT_ARGS}
    )
    for argv in argvs:
        assert (ROOT / argv[1]).exists(), f"{argv[1]} does not exist"
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT_DRIVER],
        input=json.dumps([[str(ROOT / a[1]), *a[2:]] for a in argvs]),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return dict(zip(argvs, json.loads(p.stdout.splitlines()[-1]), strict=True))


def check_python(cmd: Cmd) -> None:
    args = list(cmd.argv[1:])
    if args[:2] == ["-m", "venv"]:
        return  # the standard library's
    if args[:2] == ["-m", "pytest"]:
        return check_pytest(args[2:])
    if args[:1] == ["-m"]:
        pytest.skip(EXTERNAL[args[1]])
    if args[:1] == ["-c"]:
        ast.parse(args[1])  # Python syntax; run only where it needs nothing external (RUN)
        return
    error = _script_results()[cmd.argv]
    assert not error, f"`{' '.join(cmd.argv)}`: {error}"


@pytest.mark.parametrize(
    "cmd", COMMANDS, ids=[f"{c.where} {' '.join(c.argv)[:60]}" for c in COMMANDS]
)
def test_doc_command_parses(cmd: Cmd):
    prog = cmd.argv[0]
    if any(re.fullmatch(r"<[^>]*", w) or w.endswith(">") for w in cmd.argv):
        pytest.skip("a placeholder (<worker command>), not a command")
    if prog == "forenset":
        check_forenset(cmd)
    elif prog == "prefect":
        check_prefect(cmd)
    elif prog in ("python", "python3"):
        check_python(cmd)
    elif prog == "pytest":
        check_pytest(list(cmd.argv[1:]))
    elif prog == "pip":
        check_pip(list(cmd.argv[1:]))
    elif prog in (".", "source"):
        assert cmd.argv[1] == ".venv/bin/activate"  # made by README's `python3 -m venv .venv`
    elif prog == "export":
        assert all(re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", w) for w in cmd.argv[1:]), cmd.argv
    elif prog == "cp":
        pass  # run by test_examples_readme_copy_runs
    elif prog in EXTERNAL:
        pytest.skip(EXTERNAL[prog])
    else:
        pytest.fail(f"{cmd.where}: `{prog}` is not classified: add it to EXTERNAL with a reason")


# ------------------------------------------------------------------ the ones that really run


def _runnable(c: Cmd) -> bool:
    if c.argv[0] != "forenset" or c.argv[1] not in RUN:
        return False
    if c.argv[1].startswith("--"):
        return len(c.argv) == 2
    return (
        len(c.argv) > 2
        and c.argv[2] in PLACEHOLDER_RUNS  # a run directory we can give it
        and not any("|" in w for w in c.argv)  # a synopsis's alternatives
        and all(not re.fullmatch(r"[A-Z_]+", w) for w in c.argv[3:])  # no other placeholder
    )


RUNNABLE = [c for c in COMMANDS if _runnable(c)]


def test_some_doc_commands_really_run():
    assert {c.argv[1] for c in RUNNABLE} == RUN


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A real small build (two photos, one generator, bare loop) for the commands to read."""
    from forenset.config import validate_config
    from tests.conftest import small_config_dict
    from tests.helpers import run_local

    run = tmp_path_factory.mktemp("doc-commands") / "run"
    cfg = small_config_dict(
        run,
        sources={"samples": ["astronaut", "coffee"], "max_side": 64},
        generators=[{"name": "cv-a", "family": "classical"}],
        scenarios={"enabled": False},
    )
    _, stats, _ = run_local(validate_config(cfg))
    assert not any(s.failures for s in stats.values())
    return run


@pytest.mark.parametrize(
    "cmd", RUNNABLE, ids=[f"{c.where} {' '.join(c.argv)[:60]}" for c in RUNNABLE]
)
def test_doc_command_runs(cmd: Cmd, tiny_run):
    from typer.testing import CliRunner

    argv = [str(tiny_run) if w in PLACEHOLDER_RUNS else w for w in cmd.argv[1:]]
    from forenset import cli

    _cli_root()
    result = CliRunner().invoke(cli.app, argv)
    assert result.exit_code == 0, (
        f"`{' '.join(cmd.argv)}` exited {result.exit_code}:\n{result.output}"
    )
    assert result.output.strip()


def test_examples_readme_copy_runs(tmp_path):
    """examples/README.md's first command (copy the default config) runs as written."""
    (cp,) = [c for c in COMMANDS if c.argv[0] == "cp"]
    script = " ".join(shlex.quote(w) if not w.startswith("$(") else f'"{w}"' for w in cp.argv)
    bindir = Path(sys.executable).parent  # the venv's `python`, as after `. .venv/bin/activate`
    p = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)},
    )
    assert p.returncode == 0, p.stderr
    from forenset.config import load_config

    assert load_config(tmp_path / "my.yaml").run_dir


def test_the_checks_catch_what_a_user_would_hit():
    """The two commands issue 41 found broken, and their kin, fail these checks."""
    with pytest.raises(AssertionError, match="No such option: --run-dir"):
        check_forenset(Cmd("x", ("forenset", "status", "--run-dir", "s3://b/r"), False))
    with pytest.raises(AssertionError, match="No such option: --config"):
        check_forenset(Cmd("x", ("forenset", "build", "--config", "examples/api.yaml"), False))
    with pytest.raises(AssertionError, match="no such option --holdouts"):
        check_forenset(Cmd("x", ("forenset", "split", "DIR", "--holdouts", "F"), True))
    with pytest.raises(AssertionError, match="no such command"):
        check_forenset(Cmd("x", ("forenset", "perturb", "previews"), True))
    with pytest.raises(AssertionError, match="Missing argument"):
        check_forenset(Cmd("x", ("forenset", "eval"), False))
    with pytest.raises(AssertionError, match="UnknownOptionError"):
        check_prefect(Cmd("x", ("prefect", "worker", "start", "--pools", "cpu"), False))
    with pytest.raises(AssertionError, match="unregistered markers"):
        check_pytest(["-m", "not slowest"])
    with pytest.raises(AssertionError, match="does not exist"):
        check_pytest(["tests/no_such_dir"])
    with pytest.raises(AssertionError, match="not in pyproject"):
        check_pip(["forenset[s4]"])
    with pytest.raises(AssertionError, match="unrecognized arguments"):
        check_python(Cmd("x", BAD_SCRIPT_ARGS, False))


def test_ci_runs_readme_test_command():
    """.ci/run ends with README's test command, word for word, so the times README states are
    the times CI takes."""
    readme = (ROOT / "README.md").read_text().split("# 2. run the tests\n", 1)[1].splitlines()[0]
    assert "pytest" in readme
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == readme
