"""The test loop itself: README's command runs on every core, and the soak run stays out of
both the full suite and the inner loop (``-m "not slow"``) unless asked for."""

from __future__ import annotations

import json
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


def test_auto_starts_three_workers_per_two_cores_unless_xdist_is_told_otherwise(monkeypatch):
    """``-n auto`` oversubscribes the cores by half (tests/conftest.py): the suite waits on
    subprocesses and servers for about half its seconds. xdist's own variable still wins."""
    from tests import conftest

    one_core = {min(os.sched_getaffinity(0))}
    for cores, workers in ((1, 2), (2, 3), (4, 6), (16, 24)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid, n=cores: set(range(n)))
        assert conftest.pytest_xdist_auto_num_workers(None) == workers
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "5")
    assert conftest.pytest_xdist_auto_num_workers(None) is None  # xdist's hook reads the 5
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS")
    p = subprocess.run(  # on one core xdist alone would start 1 worker; the hook gives 2
        [sys.executable, "-m", "pytest", "-n", "auto", "-p", "no:cacheprovider",
         "tests/core/test_layers.py::test_no_import_cycles"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=lambda: os.sched_setaffinity(0, one_core),
    )  # fmt: skip
    assert "created: 2/2 workers" in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]


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


class _Item:
    """The two things longest_modules_first reads from a pytest item."""

    def __init__(self, nodeid: str, slow: bool = False):
        self.nodeid, self.slow = nodeid, slow

    def get_closest_marker(self, name: str):
        return object() if name == "slow" and self.slow else None


def test_xdist_gets_the_longest_modules_first_each_kept_whole(monkeypatch, tmp_path):
    import tests.conftest as conftest

    table = tmp_path / "module_seconds.json"
    table.write_text('{"a.py": 1.0, "b.py": 90.0}')
    monkeypatch.setattr(conftest, "MODULE_SECONDS", table)
    items = [_Item("a.py::t1"), _Item("a.py::t2"), _Item("b.py::t"), _Item("c.py::t", slow=True)]
    got = [it.nodeid for it in conftest.longest_modules_first(items)]
    # b measured 90 s; c unmeasured counts 30 s per slow test; a measured 1 s; no test dropped
    assert got == ["b.py::t", "c.py::t", "a.py::t1", "a.py::t2"]
    # the checked-in table holds the measured run (scripts/module_seconds.py refreshes it)
    measured = json.loads((ROOT / "tests" / "module_seconds.json").read_text())
    assert "tests/integration/test_deployment.py" in measured
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"][
        "addopts"
    ].split() == ["--dist", "loadscope", "--no-loadscope-reorder"]
