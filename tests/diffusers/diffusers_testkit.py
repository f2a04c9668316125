"""Test helpers for the diffusers backend: tiny pipelines (no download), a recording wrapper."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from PIL import Image

from forenset.backends.image.diffusers_backend import DiffusersBackend, DiffusersConfig


def tiny_config(pipeline: str, **overrides: Any) -> DiffusersConfig:
    """A CPU config for a tiny pipeline: 2 steps, small batches."""
    base: dict[str, Any] = {"pipeline": pipeline, "tiny": True, "steps": 2, "batch_size": 4}
    base.update(overrides)
    return DiffusersConfig(**base)


def tiny_backend(pipeline: str, **overrides: Any) -> DiffusersBackend:
    return DiffusersBackend(tiny_config(pipeline, **overrides))


def photo(width: int, height: int, seed: int = 0) -> Image.Image:
    """A smooth synthetic 'photo' (gradients + a disc), deterministic per seed."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    r = xx / max(width - 1, 1) * 255
    g = yy / max(height - 1, 1) * 255
    cx, cy = rng.uniform(0.3, 0.7) * width, rng.uniform(0.3, 0.7) * height
    b = np.where((xx - cx) ** 2 + (yy - cy) ** 2 < (min(width, height) / 4) ** 2, 220, 40)
    return Image.fromarray(np.stack([r, g, b], axis=-1).astype(np.uint8))


class RecordingPipeline:
    """Wraps a real tiny pipeline: records each call's batch and size; can simulate failures.

    ``oom_above``: raise torch.cuda.OutOfMemoryError for batches larger than this (the exact
    exception a CUDA allocation failure raises). ``fail_prompt``: raise ValueError when a
    batch contains that prompt (a bad item).
    """

    def __init__(self, inner: Any, oom_above: int | None = None, fail_prompt: str | None = None):
        self.inner = inner
        self.oom_above = oom_above
        self.fail_prompt = fail_prompt
        self.calls: list[dict[str, Any]] = []

    @property
    def scheduler(self) -> Any:
        return self.inner.scheduler

    def __call__(self, **kwargs: Any) -> Any:
        n = len(kwargs["prompt"])
        size = (kwargs.get("width"), kwargs.get("height"))
        if size == (None, None) and "image" in kwargs:
            size = kwargs["image"][0].size
        self.calls.append({"batch": n, "size": size, "prompts": list(kwargs["prompt"])})
        if self.oom_above is not None and n > self.oom_above:
            raise torch.cuda.OutOfMemoryError(f"simulated: batch {n} > {self.oom_above}")
        if self.fail_prompt is not None and self.fail_prompt in kwargs["prompt"]:
            raise ValueError(f"simulated bad item: {self.fail_prompt!r}")
        return self.inner(**kwargs)


def pixels(img: Image.Image) -> np.ndarray:
    return np.asarray(img, dtype=np.int16)
