"""The diffusers generator config, importable without torch (the build config embeds it)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from forenset.backends.image.registry import PipelineSpec, pipeline_spec
from forenset.confbase import operational


class DiffusersConfig(BaseModel):
    """Config of one diffusers generator; real checkpoints are only named here."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pipeline: str  # diffusers class name, e.g. "FluxPipeline", "FluxKontextPipeline"
    model: str = ""  # hub id or local path (unused when tiny)
    revision: str | None = None
    variant: str | None = None  # e.g. "fp16" weight files
    scheduler: str | None = None  # diffusers scheduler class to swap in, from the model's config
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"  # auto: bf16 CUDA, f32 CPU
    device: str = operational("auto")  # auto: "cuda" if available else "cpu"; or "cuda:1", "cpu"
    steps: int | None = Field(default=None, ge=1)  # None: the pipeline's default in registry
    guidance_scale: float | None = None
    image_guidance_scale: float | None = None  # InstructPix2Pix only
    negative_prompt: str | None = None
    size: tuple[int, int] | None = None  # (width, height) forced for every generate request
    edit_max_side: int | None = Field(default=1024, ge=8)  # edits: downscale longer side to this
    batch_size: int = operational(4, ge=1)
    cpu_offload: bool = operational(False)  # enable_model_cpu_offload (CUDA only)
    # Post-process batch k (tensor -> PIL, resize back) on a worker thread while batch k+1 is
    # denoised; at most ``overlap_depth`` batches wait there. Outputs are identical either way.
    overlap: bool = operational(True)
    overlap_depth: int = operational(2, ge=1)
    compile: bool = False  # torch.compile the denoiser (slow first call; never in tests)
    tiny: bool = False  # build a tiny random-weight pipeline instead of loading ``model``
    tiny_seed: int = 0
    load_kwargs: dict[str, Any] = Field(default_factory=dict)  # extra from_pretrained arguments
    call_kwargs: dict[str, Any] = Field(default_factory=dict)  # extra pipeline __call__ arguments

    @model_validator(mode="after")
    def _check(self) -> DiffusersConfig:
        pipeline_spec(self.pipeline)  # raises ValueError for unknown classes
        if not self.tiny and not self.model:
            raise ValueError("model is required unless tiny=true")
        if self.scheduler is not None:
            import diffusers

            if not self.scheduler.endswith("Scheduler") or not hasattr(diffusers, self.scheduler):
                raise ValueError(f"unknown diffusers scheduler {self.scheduler!r}")
        if self.size is not None and min(self.size) < 8:
            raise ValueError(f"size must be at least 8x8, got {self.size}")
        return self

    @property
    def spec(self) -> PipelineSpec:
        return pipeline_spec(self.pipeline)

    def resolved_device(self) -> str:
        if self.device == "auto":
            import torch  # lazy: the config must not pull in torch

            return "cuda" if torch.cuda.is_available() else "cpu"
        return self.device

    def resolved_dtype(self) -> str:
        if self.dtype != "auto":
            return self.dtype
        return "float32" if self.resolved_device() == "cpu" else "bfloat16"

    def model_id(self) -> str:
        return self.model if not self.tiny else f"tiny-random/{self.pipeline}"

    def load_key(self) -> str:
        """What decides which pipeline object is loaded: the process cache key."""
        keys = ["pipeline", "model", "revision", "variant", "scheduler", "cpu_offload", "compile"]
        keys.append("tiny")
        d: dict[str, Any] = {k: getattr(self, k) for k in keys}
        d.update(
            device=self.resolved_device(),
            dtype=self.resolved_dtype(),
            tiny_seed=self.tiny_seed if self.tiny else None,
            load_kwargs=self.load_kwargs,
        )
        return json.dumps(d, sort_keys=True, default=str)

    def resolved(self) -> dict[str, Any]:
        """The full config with defaults filled in: feed this to shard fingerprints."""
        spec = self.spec
        d = self.model_dump()
        d.update(
            device=self.resolved_device(),
            dtype=self.resolved_dtype(),
            steps=self.steps or spec.default_steps,
            guidance_scale=float(_or(self.guidance_scale, spec.default_guidance)),
            image_guidance_scale=(
                _or(self.image_guidance_scale, 1.5) if spec.image_guidance else None
            ),
            negative_prompt=_or(self.negative_prompt, spec.default_negative_prompt),
        )
        return d


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value
