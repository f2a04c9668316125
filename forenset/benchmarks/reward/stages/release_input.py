"""A release folder (``reward.release``) as the input of the reward stages: read once per stage
object, under the read policy (``release.load_release``), its content digest the fingerprint of
what is made from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forenset.benchmarks.reward.config import RewardConfig
from forenset.benchmarks.reward.release import Release, load_release, release_digest, stage_rows
from forenset.errors import ConfigurationError, clip


def release_of(stage: Any) -> Release | None:
    """The stage's release, read once (None without ``reward.release``); a path that is not a
    folder is a ConfigurationError (one sentence: every shard would fail alike)."""
    cfg: RewardConfig = stage.cfg
    if cfg.release is None:
        return None
    cached = stage.__dict__.get("_release")
    if cached is None:
        folder = Path(cfg.release.path)
        if not folder.is_dir():
            raise ConfigurationError(f"reward.release.path {clip(str(folder))} is not a folder")
        cached = stage.__dict__["_release"] = load_release(folder, cfg.release.annotations)
    return cached


def release_config(stage: Any) -> dict[str, Any] | None:
    """What a shard made from the release depends on: its content digest and the file read."""
    rel = release_of(stage)
    if rel is None:
        return None
    cfg: RewardConfig = stage.cfg
    assert cfg.release is not None
    return {"release": release_digest(rel), "annotations": cfg.release.annotations}


def release_rows(stage: Any, table: str) -> list[dict[str, Any]]:
    rel = release_of(stage)
    return stage_rows(rel)[table] if rel is not None else []
