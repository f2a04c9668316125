"""One offline reward build shared by the reward tests (built once per test process).

The small test build (tests/conftest.py) with ``reward:`` on: 4 photos -> 4 square reals and 4
text-to-image fakes from their captions by two tiny random-weight diffusers pipelines (two
caption groups), the three default offline policies, the rule judge asked both ways, and three
simulated annotators. Tests that need another config copy the run directory first.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

from forenset.config import validate_config
from forenset.store.run_store import RunStore
from tests.conftest import small_config_dict
from tests.helpers import run_local

TINY = {"pipeline": "StableDiffusionPipeline", "tiny": True, "steps": 2, "batch_size": 4}
REWARD = {
    "enabled": True,
    "images": 4,
    "image_size": 64,
    "elo_shuffles": 20,
    "generators": [
        {"name": "sd-a", "backend": "diffusers", "family": "sd", "t2i_size": [64, 64],
         "diffusers": TINY},
        {"name": "sd-b", "backend": "diffusers", "family": "sd", "t2i_size": [64, 64],
         "diffusers": {**TINY, "tiny_seed": 1}},
    ],
}  # fmt: skip


def reward_config(run_dir: Path | str, **reward: Any) -> dict[str, Any]:
    return small_config_dict(run_dir, reward={**REWARD, **reward})


@functools.cache
def offline_build() -> tuple[Path, dict[str, Any]]:
    """(run dir, first build's stats) of the shared offline reward build."""
    root = Path(tempfile.mkdtemp(prefix="forenset-reward-")) / "run"
    _, stats, _ = run_local(validate_config(reward_config(root)))
    return root, stats


def copied_build(dest: Path) -> Path:
    """A private copy of the shared build's run directory (to rebuild with another config)."""
    src, _ = offline_build()
    shutil.copytree(src, dest)
    return dest


def store() -> RunStore:
    return RunStore(str(offline_build()[0]))


# The stages a change of ``reward.labels`` must leave alone.
STAGES_AFTER_LABELS = ("reward_images", "reward_responses", "reward_triplets", "reward_judgments")
