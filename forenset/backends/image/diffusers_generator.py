"""The diffusers backend as the image-backend factory sees it, importable without torch.

Why a class of its own: planning asks every generator what it can do, and the answer for a
diffusers generator comes from its pipeline class (text-to-image or editing, registry.py); the
backend itself (diffusers_backend.py) imports torch, which planning must not pay for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from forenset.text.models import ALL_KINDS

if TYPE_CHECKING:
    from forenset.backends.image.diffusers_backend import DiffusersBackend
    from forenset.backends.image.generator import GeneratorConfig


class DiffusersGenerator:
    """Registered as ``diffusers``: tasks from the pipeline class, builds a DiffusersBackend."""

    edit_kinds = frozenset(ALL_KINDS)  # instruction editing pipelines take every kind

    @classmethod
    def tasks_for(cls, generator: GeneratorConfig) -> set[str]:
        """One task per pipeline class: 't2i' or 'edit'."""
        assert generator.diffusers is not None  # GeneratorConfig requires the block
        return {generator.diffusers.spec.task}

    @classmethod
    def from_generator(cls, generator: GeneratorConfig) -> DiffusersBackend:
        """The pipeline is loaded once per process (diffusers_backend's cache)."""
        from forenset.backends.image.diffusers_backend import DiffusersBackend

        assert generator.diffusers is not None
        return DiffusersBackend(generator.diffusers)
