"""Known diffusers pipeline classes: what task each does and how it is called.

Why a table: the backend calls very different pipelines through one code path; the few ways
they differ (text-to-image or edit, the guidance keyword, the size multiple, extra call
arguments) are data, kept here in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Task = Literal["t2i", "edit"]


@dataclass(frozen=True)
class PipelineSpec:
    """How the backend drives one diffusers pipeline class."""

    name: str
    task: Task
    guidance_kw: str = "guidance_scale"  # call argument that carries config.guidance_scale
    image_guidance: bool = False  # takes image_guidance_scale (InstructPix2Pix)
    multiple_of: int = 8  # width/height are rounded down to this
    pass_size: bool = True  # pipeline accepts height/width
    default_steps: int = 30
    default_guidance: float = 7.5
    default_negative_prompt: str | None = None
    extra_call: dict[str, Any] = field(default_factory=dict)


PIPELINES: dict[str, PipelineSpec] = {
    s.name: s
    for s in [
        PipelineSpec("StableDiffusionPipeline", "t2i", default_steps=30, default_guidance=7.5),
        PipelineSpec("StableDiffusionXLPipeline", "t2i", default_steps=30, default_guidance=5.0),
        PipelineSpec(
            "StableDiffusion3Pipeline", "t2i", multiple_of=16, default_steps=28, default_guidance=7
        ),
        PipelineSpec("FluxPipeline", "t2i", multiple_of=16, default_steps=28, default_guidance=3.5),
        PipelineSpec(
            "FluxKontextPipeline",
            "edit",
            multiple_of=16,
            default_steps=28,
            default_guidance=2.5,
            # Kontext otherwise resizes to its ~1 MP training resolutions; we keep the photo's.
            extra_call={"_auto_resize": False},
        ),
        PipelineSpec(
            "StableDiffusionInstructPix2PixPipeline",
            "edit",
            image_guidance=True,
            pass_size=False,  # output size follows the input image
            default_steps=20,
            default_guidance=7.5,
        ),
        PipelineSpec(
            "QwenImageEditPipeline",
            "edit",
            guidance_kw="true_cfg_scale",
            multiple_of=16,
            default_steps=50,
            default_guidance=4.0,
            default_negative_prompt=" ",  # true CFG only runs with a negative prompt
        ),
    ]
}


def pipeline_spec(name: str) -> PipelineSpec:
    """Return the spec for a pipeline class name, or raise ValueError naming the known ones."""
    try:
        return PIPELINES[name]
    except KeyError:
        known = ", ".join(sorted(PIPELINES))
        raise ValueError(f"unknown pipeline {name!r}; known: {known}") from None
