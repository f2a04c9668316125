"""The test loop itself: README's command runs on every core, and the soak run stays out of
both the full suite and the inner loop (``-m "not slow"``) unless asked for."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KILL = "tests/reliability/test_rel_kill.py"


def test_readme_runs_the_suite_on_every_core_with_xdist_from_the_dev_extra():
    readme = (ROOT / "README.md").read_text().split("# 2. run the tests\n", 1)[1].splitlines()[0]
    assert readme.endswith("pytest -q -n auto")
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert any(
        d.startswith("pytest-xdist") for d in meta["project"]["optional-dependencies"]["dev"]
    )


def collected(*args: str) -> set[str]:
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", *args, KILL],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert p.returncode in (0, 5), p.stdout + p.stderr  # 5: nothing selected
    return {line.split("[")[1].rstrip("]") for line in p.stdout.splitlines() if "::" in line}


@pytest.mark.parametrize(
    ("args", "ids"),
    [
        ((), {"2-kills"}),  # README's command: everything but soak
        (("-m", "not slow"), set()),  # the inner loop: the 2-kill CLI test is slow, 6 is soak
        (("-m", "soak"), {"6-kills"}),  # asked for by name
    ],
)
def test_soak_runs_only_when_asked_for(args, ids):
    assert collected(*args) == ids
