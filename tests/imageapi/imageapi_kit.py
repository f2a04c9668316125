"""Small real inputs and fast-retry configs for the image API backend tests."""

from __future__ import annotations

import numpy as np
from PIL import Image

from forenset.backends.image.base import EditRequest, GenerateRequest
from forenset.backends.image.gemini_images import GeminiImagesConfig
from forenset.backends.image.openai_images import OpenAIImagesConfig
from forenset.seeds import rng_for

OPENAI_SENTINEL = "sk-IMGSENTINEL-4c1d9e7a2b"
GEMINI_SENTINEL = "AIzaIMGSENTINELgemini98765"
FAST = dict(backoff_base_s=0.01, backoff_max_s=0.05, timeout_s=5.0)


def openai_config(server, **kw) -> OpenAIImagesConfig:
    base = dict(model="gpt-image-1", base_url=server.base_url, api_key_env="IMG_OPENAI_KEY")
    return OpenAIImagesConfig(**{**base, **FAST, **kw})


def gemini_config(server, **kw) -> GeminiImagesConfig:
    base = dict(
        model="gemini-2.5-flash-image", base_url=server.base_url, api_key_env="IMG_GEMINI_KEY"
    )
    return GeminiImagesConfig(**{**base, **FAST, **kw})


def photo(i: int = 0, size: tuple[int, int] = (80, 64)) -> Image.Image:
    """A small random-texture photo (seeded), so edits are visible against it."""
    rng = rng_for("imageapi-test", i)
    arr = rng.integers(0, 255, size=(size[1], size[0], 3), dtype=np.uint8)
    return Image.fromarray(arr, "RGB")


def gen_req(i: int = 0, size: tuple[int, int] = (64, 48)) -> GenerateRequest:
    return GenerateRequest(
        prompt=f"a red bicycle number {i}", seed=100 + i, size=size, item_id=f"g{i}"
    )


def edit_req(i: int = 0, size: tuple[int, int] = (80, 64), mask: bool = False) -> EditRequest:
    m = None
    if mask:
        m = Image.new("L", size, 0)
        m.paste(255, (10, 10, 40, 40))
    return EditRequest(
        image=photo(i, size),
        instruction={"text": f"add a small blue kite {i}", "family": "add"},
        seed=200 + i,
        mask=m,
        item_id=f"e{i}",
    )
