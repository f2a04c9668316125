"""A generator of the candidates stage's pool: its config, independent of the backend code.

The candidates stage's config is the list of these (``generators:`` in YAML). The offline
editor and the image-backend factory read it; it imports no SDK."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from forenset.backends.image import factory
from forenset.backends.image.api_config import GeminiImagesConfig, OpenAIImagesConfig
from forenset.backends.image.diffusers_config import DiffusersConfig
from forenset.confbase import Strict, fingerprint_view


class FaultRates(Strict):
    """Faulty-generator mode: the share of edits that fail in a known way (ground truth kept)."""

    missing: float = Field(0.0, ge=0, le=1)
    partial: float = Field(0.0, ge=0, le=1)
    offtarget: float = Field(0.0, ge=0, le=1)
    artifacts: float = Field(0.0, ge=0, le=1)

    @model_validator(mode="after")
    def _sum(self) -> FaultRates:
        if self.missing + self.partial + self.offtarget + self.artifacts > 1.0 + 1e-9:
            raise ValueError("fault rates must sum to at most 1")
        return self


class GeneratorConfig(Strict):
    """One generator of the pool. ``family`` groups generators for held-out test splits."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")
    # a registered image backend (factory.py): offline, diffusers, openai, gemini, or a plugin's
    backend: str = "offline"
    family: str = "classical"
    model: str = "opencv"
    # offline (classical manipulations)
    inpaint: Literal["telea", "ns"] = "telea"
    blend: Literal["feather", "poisson"] = "feather"
    strength: float = Field(1.0, gt=0, le=3)
    faults: FaultRates = FaultRates()
    # diffusers: the pipeline config (its class decides text-to-image vs editing)
    diffusers: DiffusersConfig | None = None
    # image APIs (gpt-image, Gemini image output); keys come from the env var they name
    openai: OpenAIImagesConfig | None = None
    gemini: GeminiImagesConfig | None = None
    t2i_size: tuple[int, int] = (512, 512)  # (width, height) of text-to-image candidates
    options: dict[str, Any] = {}  # settings of a plugin backend, read by the plugin

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, v: str) -> str:
        return factory.check_name(v)

    @model_validator(mode="after")
    def _backend_config(self) -> GeneratorConfig:
        if self.backend == "diffusers" and self.diffusers is None:
            raise ValueError(
                "backend 'diffusers' needs a 'diffusers:' block (pipeline, model or tiny)"
            )
        if self.backend == "offline" and self.diffusers is not None:
            raise ValueError("a 'diffusers:' block needs backend: diffusers")
        if self.backend == "external":  # its options are checked with the config, not at build
            from forenset.backends.image.external import options_problem

            problem = options_problem(self.options)
            if problem:
                raise ValueError(problem)
        return self

    def tasks(self) -> set[str]:
        """What this generator can do: 'edit' (photos + instructions) and/or 't2i' (prompts),
        as its backend class declares."""
        return factory.tasks_for(self)

    def edit_kinds(self) -> frozenset[str]:
        """The instruction kinds this generator executes, as its backend class declares."""
        return factory.edit_kinds_for(self)

    def fingerprint(self) -> dict[str, Any]:
        """What shapes this generator's pixels: the config without its operational fields
        (rate limits, retries, keys, batch size, device: ``forenset.confbase``)."""
        view = fingerprint_view(self)
        if not self.options:
            del view["options"]  # fingerprints from before the field existed stay valid
        return view
