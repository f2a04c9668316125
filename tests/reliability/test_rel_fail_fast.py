"""A configuration problem every shard of a stage would hit stops the build early, with one
sentence and a non-zero exit, instead of a "complete" build of error rows."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from forenset.config import validate_config
from forenset.scheduler import BuildFailed
from tests.helpers import run_local
from tests.reliability.clikit import tiny_config_dict

# CLI builds report to this worker's Prefect server (conftest.py: prefect_api)
pytestmark = pytest.mark.usefixtures("prefect_api")

MISSING = {
    "name": "sd-missing",
    "backend": "diffusers",
    "family": "sd",
    "diffusers": {"pipeline": "StableDiffusionInstructPix2PixPipeline", "device": "cpu"},
}


def broken_config(tmp_path):
    d = tiny_config_dict(tmp_path / "run")
    gen = json.loads(json.dumps(MISSING))
    gen["diffusers"]["model"] = str(tmp_path / "models" / "ip2p")  # never created
    d["generators"] = [gen]
    return d


def test_missing_model_path_stops_the_scheduler(tmp_path):
    d = broken_config(tmp_path)
    with pytest.raises(
        BuildFailed, match=r"stage candidates: generator sd-missing: .*models/ip2p.*does not exist"
    ):
        _, stats, executed = run_local(validate_config(d))
    state = json.loads((tmp_path / "run" / "state.json").read_text())
    assert state["status"] == "failed"
    # nothing downstream of the failed stage ran, and no error rows stand in for candidates
    cand = tmp_path / "run" / "stages" / "candidates"
    assert not list(cand.rglob("*.parquet")) if cand.exists() else True
    assert not (tmp_path / "run" / "stages" / "diffs").exists()


@pytest.mark.slow  # a CLI build with its own Prefect server
def test_cli_says_one_sentence_and_exits_non_zero(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(broken_config(tmp_path)))
    p = subprocess.run(
        [sys.executable, "-m", "forenset.cli", "build", str(cfg)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 1, p.stderr[-2000:]
    err = " ".join(p.stderr.split())
    assert (
        "build stopped: stage candidates: generator sd-missing:" in err and "does not exist" in err
    ), err
    assert "Traceback" not in p.stderr
    assert "Export:" not in p.stdout  # no "complete" build with an empty dataset


def test_configuration_error_while_planning_a_later_stage_stops_with_the_sentence(
    tmp_path, monkeypatch
):
    """Planning can read settings too (external listings); its ConfigurationError ends the
    build as a shard's would: one sentence, state failed, no traceback out of the scheduler."""
    from forenset.errors import ConfigurationError
    from forenset.tasks.diffs import Diffs

    def broken_plan(self, info):
        raise ConfigurationError("listing /gone.csv does not exist")

    monkeypatch.setattr(Diffs, "plan", broken_plan)
    with pytest.raises(BuildFailed, match=r"^stage diffs: listing /gone.csv does not exist$"):
        run_local(validate_config(tiny_config_dict(tmp_path / "run")))
    state = json.loads((tmp_path / "run" / "state.json").read_text())
    assert state["status"] == "failed"
    assert not (tmp_path / "run" / "stages" / "judgments").exists()
