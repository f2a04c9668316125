"""Every CLI command answers bad input with one sentence and a non-zero exit (issue 32, cases 9
and 10): a run dir that is a file, a folder no build wrote, a binary or duplicate-key config,
``split`` while a build holds the lock; ``query --format csv`` escapes formula cells."""

from __future__ import annotations

import csv
import io
import json
import os

import pytest
import yaml
from typer.testing import CliRunner

from forenset.cli import _mount_subapps, app
from forenset.config import validate_config
from tests.conftest import small_config_dict

_mount_subapps()


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), terminal_width=200)


def one_sentence(res, code: int = 2, *needles: str) -> None:
    out = res.output.strip()
    assert res.exit_code == code, (res.exit_code, out, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in out and out.startswith("error:") and out.count("error:") == 1, out
    out = " ".join(out.split())  # Rich wraps at 150 columns
    for n in needles:
        assert n in out, (n, out)


@pytest.fixture
def places(tmp_path):
    f = tmp_path / "afile"
    f.write_text("hi")
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    gold = tmp_path / "gold.json"
    gold.write_text('[{"id": 1}]')
    return f, empty, gold


def test_run_dir_that_is_a_file(places):
    f, _, gold = places
    for args in (
        ("status", str(f)),
        ("report", str(f)),
        ("query", str(f), "select 1"),
        ("import-gold", str(f), str(gold)),
        ("import-annotations", str(f), str(gold)),
        ("export", str(f), "--format", "hf"),
    ):
        one_sentence(invoke(*args), 2, "is a file, not a run directory")


def test_folder_that_is_not_a_run(places):
    _, empty, gold = places
    for args in (("status", str(empty)), ("query", str(empty), "select 1"),
                 ("import-gold", str(empty), str(gold))):  # fmt: skip
        one_sentence(invoke(*args), 2, "is not a forenset run directory")
    assert os.listdir(empty) == []  # nothing was written into it


def test_run_with_a_binary_saved_config(tmp_path, places):
    _, _, gold = places
    run = tmp_path / "run"
    run.mkdir()
    (run / "state.json").write_text("{}")
    (run / "config.yaml").write_bytes(bytes(range(256)))
    for args in (("status", str(run)), ("report", str(run)), ("import-gold", str(run), str(gold)),
                 ("split", str(run), "--holdout", "x")):  # fmt: skip
        one_sentence(invoke(*args), 2, "is not a readable build config")


def test_bad_config_files(tmp_path):
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(bytes(range(256)) * 3)
    one_sentence(invoke("build", str(binary)), 2, "is not UTF-8 text")
    dup = tmp_path / "dup.yaml"
    dup.write_text("seed: 1\nshard_size: 2\nseed: 2\n")
    one_sentence(invoke("build", str(dup)), 2, "duplicate key 'seed'")
    one_sentence(invoke("build", str(tmp_path)), 2, "is not a regular file")


def test_version():
    from forenset import __version__

    res = invoke("--version")
    assert res.exit_code == 0 and res.output.strip() == f"forenset {__version__}"


def test_query_csv_escapes_formula_cells(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "state.json").write_text("{}")
    res = invoke(
        "query",
        str(run),
        "SELECT '=HYPERLINK(\"http://x\",\"y\")' AS a, '+1+2' AS b, '@SUM(A1)' AS c, "
        "'-3' AS d, -4 AS e, 'plain' AS f",
        "--format",
        "csv",
    )
    assert res.exit_code == 0, res.output
    rows = list(csv.reader(io.StringIO(res.output)))
    assert rows[1] == ['\'=HYPERLINK("http://x","y")', "'+1+2", "'@SUM(A1)", "-3", "-4", "plain"]


@pytest.mark.slow  # a CLI build with its own Prefect server
@pytest.mark.timeout(300)
def test_split_during_a_build_is_one_sentence(tmp_path):
    """Through a real ``forenset`` process: ``split`` runs the build through Prefect, whose
    logging must not outlive a test runner's captured streams."""
    import subprocess
    import sys

    run = tmp_path / "run"
    run.mkdir()
    cfg = validate_config(small_config_dict(run))
    (run / "config.yaml").write_text(yaml.safe_dump(cfg.resolved()))
    (run / "build.lock").write_text(
        json.dumps({"pid": os.getpid(), "host": os.uname().nodename})
    )  # held by this live process, as by a running build
    p = subprocess.run(
        [sys.executable, "-m", "forenset.cli", "split", str(run), "--holdout", "faulty"],
        capture_output=True,
        text=True,
        timeout=240,
        env=dict(os.environ),
    )
    err = " ".join(p.stderr.split())
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and "is being built by process" in err, p.stderr
