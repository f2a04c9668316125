"""Mixed task runners in one Prefect build: threads, processes and Dask give the same rows."""

import pytest

from forenset.config import validate_config
from forenset.flows.build import run_build
from forenset.store.run_store import RunStore
from tests.conftest import small_config_dict
from tests.helpers import all_rows, run_local

pytestmark = pytest.mark.slow


def _reference(tmp_path):
    """A small config and the rows the bare thread loop writes for it."""
    base = small_config_dict(
        tmp_path / "ref",
        sources={"samples": ["coffee", "rocket"], "max_side": 64},
        scenarios={"enabled": False},
    )
    ref, _, _ = run_local(validate_config(base))
    return base, ref


def test_processes_and_dask_runners_match_threads(tmp_path, capfd):
    base, ref = _reference(tmp_path)
    capfd.readouterr()
    mixed = dict(
        base,
        run_dir=str(tmp_path / "mixed"),
        runners={
            "default": {"kind": "threads", "max_workers": 2},
            "diffs": {"kind": "dask", "max_workers": 2},
            "perturbations": {"kind": "processes", "max_workers": 2},
        },
    )
    cfg = validate_config(mixed)
    result = run_build(cfg.run_dir, cfg)
    assert all(s["failed"] == 0 for s in result["stages"].values())
    assert all_rows(RunStore(cfg.run_dir)) == all_rows(ref)
    # a build that succeeds on a local Dask cluster is quiet (here and in its worker processes)
    said = "".join(capfd.readouterr())
    for noise in ("INFO    | distributed", "still alive", "CommClosedError", "Traceback"):
        assert noise not in said, said[-3000:]


def test_ray_runner_matches_threads(tmp_path):
    """A stage on a local Ray cluster (prefect-ray) writes the same rows as the thread runner.
    Ray workers are separate processes: they get only the config hash and read config.yaml.
    ``dev`` installs prefect-ray (the ``[ray]`` extra), so this runs in CI; its aiohttp no longer
    changes the Gemini backends (they pin an httpx transport, see ``genai_transport``)."""
    pytest.importorskip("prefect_ray")
    base, ref = _reference(tmp_path)
    cfg = validate_config(
        dict(
            base,
            run_dir=str(tmp_path / "ray"),
            runners={
                "default": {"kind": "threads", "max_workers": 2},
                "perturbations": {"kind": "ray", "max_workers": 2},
            },
        )
    )
    result = run_build(cfg.run_dir, cfg)
    assert all(s["failed"] == 0 for s in result["stages"].values())
    assert result["stages"]["perturbations"]["run"] > 0
    assert all_rows(RunStore(cfg.run_dir)) == all_rows(ref)
