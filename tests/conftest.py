"""Shared fixtures: an isolated Prefect home, small build configs, a bad-input corpus."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

_PREFECT_HOME = tempfile.mkdtemp(prefix="forenset-prefect-")
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["FORENSET_STRICT_ROWS"] = "1"  # to_table refuses ok rows missing a column
# A suite started in the background by a non-interactive shell (`.ci/run &`, nohup) inherits
# SIGINT ignored, and so would every CLI the tests start: the Ctrl-C tests would then test
# nothing (the build ignores the signal and exits 0). Python's own handler, as in a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    """Soak runs (marker ``soak``) only when ``-m`` names them: ``pytest -m "not slow"`` (the
    inner loop) and plain ``pytest`` leave them out alike. An addopts ``-m 'not soak'`` would be
    replaced by any ``-m`` given on the command line."""
    if "soak" in (config.getoption("markexpr") or ""):
        return
    soak = [it for it in items if it.get_closest_marker("soak")]
    if soak:
        config.hook.pytest_deselected(items=soak)
        items[:] = [it for it in items if not it.get_closest_marker("soak")]
    if hasattr(config, "workerinput"):  # an xdist worker: the controller schedules this order
        items[:] = longest_modules_first(items)


def pytest_xdist_auto_num_workers(config) -> int | None:
    """``-n auto``: three workers per two cores (``cores + ceil(cores / 2)``), not one per core.
    About half of the suite's seconds are spent waiting (on CLI subprocesses, Prefect and S3
    servers, kill/resume sleeps, model servers), so one worker per core left a core idle for
    much of a run. xdist's own ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still wins, and ``-n N`` is
    taken as given."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores + (cores + 1) // 2


@pytest.fixture(scope="session")
def prefect_api_url() -> str:
    """The API URL of this test process's own Prefect server (one per xdist worker, started on
    first use): the server an in-process flow of this worker uses anyway (Prefect's
    ``SubprocessASGIServer``, its SQLite file under this worker's ``PREFECT_HOME``), stopped
    with the worker even by SIGKILL (forenset's watchdog)."""
    from prefect.server.api.server import SubprocessASGIServer

    from forenset.flows.ephemeral import reap_server_with_this_process

    reap_server_with_this_process()
    return SubprocessASGIServer().api_url


@pytest.fixture
def prefect_api(prefect_api_url, monkeypatch) -> str:
    """``forenset build`` and ``split`` in a subprocess report to this worker's Prefect server
    (``PREFECT_API_URL``, as on a cluster) instead of each starting an ephemeral server of its
    own: ~5 s and ~5 CPU-s saved per CLI build (a tiny build: 11.0 s / 11.6 CPU-s with its
    ephemeral server, 5.9 s / 5.8 CPU-s without). Tests of the ephemeral server's own life
    (test_ephemeral, test_worker_server, test_rel_interrupt, test_cli's kill test) do not use
    it. Only subprocesses see it: Prefect read this process's settings at import."""
    monkeypatch.setenv("PREFECT_API_URL", prefect_api_url)
    return prefect_api_url


MODULE_SECONDS = Path(__file__).with_name("module_seconds.json")


def longest_modules_first(items: list) -> list:
    """``items`` with the modules that take longest first, each module's tests kept together
    and in order. With ``--dist loadscope --no-loadscope-reorder`` (pyproject.toml) xdist
    hands out modules in this order; its own reorder (most tests first) left the few-test
    long modules (a Prefect deployment, kill and resume) for last, where one of them ran on
    alone while the other worker idled. Seconds come from ``module_seconds.json`` (a measured
    run, scripts/module_seconds.py); a module not in it counts 30 s per slow test and 0.5 s
    per other test. Only the order changes: every test still runs."""
    try:
        known: dict[str, float] = json.loads(MODULE_SECONDS.read_text())
    except (OSError, ValueError):
        known = {}
    groups: dict[str, list] = {}
    for it in items:
        groups.setdefault(it.nodeid.split("::", 1)[0], []).append(it)

    def cost(module: str) -> float:
        if module in known:
            return known[module]
        return sum(30.0 if it.get_closest_marker("slow") else 0.5 for it in groups[module])

    order = sorted(groups, key=cost, reverse=True)  # stable: ties keep collection order
    return [it for module in order for it in groups[module]]


def small_config_dict(run_dir: Path | str, **over) -> dict:
    cfg = {
        "seed": 3,
        "run_dir": str(run_dir),
        "shard_size": 2,
        "sources": {"samples": ["astronaut", "coffee", "chelsea", "rocket"], "max_side": 96},
        "generators": [
            {"name": "cv-a", "family": "classical"},
            {
                "name": "cv-faulty",
                "family": "faulty",
                "faults": {"missing": 0.3, "offtarget": 0.2, "artifacts": 0.2},
            },
        ],
        "splits": {"fractions": {"train": 0.5, "validation": 0.25, "test": 0.25}},
        "evaluation": {"enabled": True, "fakes": 4, "reals": 2},
        "fakebench": {
            "enabled": True,
            "fakes": 2,
            "reals": 2,
            "models": [{"name": "always-fake", "kind": "constant", "belief": "fake"}],
        },
        "runners": {"default": {"kind": "threads", "max_workers": 2}},
    }
    cfg.update(over)
    return cfg


@pytest.fixture
def small_cfg(tmp_path):
    from forenset.config import validate_config

    return validate_config(small_config_dict(tmp_path / "run"))


@pytest.fixture(scope="session")
def small_build_master(tmp_path_factory) -> Path:
    """One bare-loop build of ``small_config_dict`` per test session (per xdist worker). Tests
    never touch it: they take a copy (``small_built``)."""
    from forenset.config import validate_config
    from tests.helpers import run_local

    run = tmp_path_factory.mktemp("small-build") / "run"
    _, stats, _ = run_local(validate_config(small_config_dict(run)))
    assert not any(s.failed for s in stats.values()), stats
    return run


@pytest.fixture
def small_built(small_build_master, tmp_path) -> Path:
    """``tmp_path / "run"`` (the run directory ``small_cfg`` names) holding a copy of the
    session's small build: a build of ``small_config_dict`` there finds every shard done, so a
    test that reads or extends that build pays a copy (~0.1 s), not a build (~7 s of CPU). A
    copied run resumes as the original would (test_dag.py checks rows and zero work)."""
    run = tmp_path / "run"
    shutil.copytree(small_build_master, run)
    return run


@pytest.fixture(params=["aiohttp-installed", "httpx-only"])
def genai_transport(request, monkeypatch):
    """Run a Gemini test as if aiohttp were installed and as if it were not.

    google-genai switches its async requests to aiohttp whenever aiohttp is importable (Ray's
    ``ray[default]`` brings it), so timeouts, error mapping and key scrubbing are checked under
    both: the backend pins an httpx transport and must behave the same either way."""
    from google.genai import _api_client

    if request.param == "aiohttp-installed":
        pytest.importorskip("aiohttp", reason="the dev extra installs aiohttp for this case")
        monkeypatch.setattr(_api_client, "has_aiohttp", True)
    else:
        monkeypatch.setattr(_api_client, "has_aiohttp", False)
    return request.param
