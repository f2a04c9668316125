"""The image-backend contract shared by offline, diffusers and API generators."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from PIL import Image


@dataclass
class EditRequest:
    """One edit: the source photo plus the structured instruction that drives it."""

    image: Image.Image
    instruction: dict[
        str, Any
    ]  # keys: text, family, kind, target, location_hint, bbox (x0,y0,x1,y1 in [0,1])
    seed: int
    mask: Image.Image | None = None
    item_id: str = ""
    donor: Image.Image | None = None  # a second photo, for splicing edits


@dataclass
class GenerateRequest:
    prompt: str
    seed: int
    size: tuple[int, int] = (512, 512)  # (width, height)
    item_id: str = ""


@dataclass
class ImageResult:
    """What a backend returns per item; errors are values, never exceptions."""

    image: Image.Image | None
    status: str = "ok"  # ok | error
    error: str | None = None
    retryable: bool = False
    latency_s: float = 0.0
    model: str = ""
    revision: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    truth: dict[str, Any] = field(
        default_factory=dict
    )  # ground truth a backend knows (offline/faulty)
    # ``image`` already encoded with ``forenset.images.encode_png`` by a backend that encodes
    # while it generates (diffusers overlap); None: the caller encodes. Same bytes either way.
    png: bytes | None = field(default=None, repr=False, compare=False)


class ImageBackend(Protocol):
    """A generator. ``name`` is the backend kind recorded in rows (offline, diffusers, openai, gemini)."""

    name: str

    def generate(self, requests: list[GenerateRequest]) -> list[ImageResult]: ...

    def edit(self, requests: list[EditRequest]) -> list[ImageResult]: ...
