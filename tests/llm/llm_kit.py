"""Helpers of the model-layer tests: fake-server specs, settings, tiny images (not fixtures)."""

from __future__ import annotations

import io
import itertools

from PIL import Image
from pydantic import BaseModel, Field

from forenset.backends.llm import ChatRequest, LLMSettings, ModelSpec
from forenset.testing.fake_gemini import FakeGemini
from forenset.testing.fake_openai import FakeOpenAI

SENTINEL_KEY = "sk-SENTINEL-7f3a9c1e5b2d4086"
GEMINI_SENTINEL = "AIzaSENTINELgemini0123456789"
_stage_ids = itertools.count()


class Caption(BaseModel):
    caption: str
    objects: list[str] = Field(min_length=1)
    salience: int = Field(ge=1, le=5)


def req(i: int = 0, **kw) -> ChatRequest:
    """A caption request for item ``i`` (keywords override any field)."""
    base = dict(
        task="caption",
        item_id=f"img{i}",
        system="Describe factually.",
        user=f"Caption image number {i} please",
        response_model=Caption,
    )
    return ChatRequest(**{**base, **kw})


def png(color=(200, 30, 30), size=(16, 16)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def openai_spec(server: FakeOpenAI, **kw) -> ModelSpec:
    base = dict(
        backend="openai",
        model="gpt-fake",
        base_url=server.base_url,
        api_key_env="FAKE_OPENAI_KEY",
        timeout_s=5.0,
    )
    return ModelSpec(**{**base, **kw})


def gemini_spec(server: FakeGemini, **kw) -> ModelSpec:
    base = dict(
        backend="gemini",
        model="gemini-fake",
        base_url=server.base_url,
        api_key_env="FAKE_GEMINI_KEY",
        timeout_s=5.0,
    )
    return ModelSpec(**{**base, **kw})


def settings(*pool: ModelSpec, **kw) -> LLMSettings:
    base = dict(backoff_base_s=0.01, backoff_max_s=0.05, max_error_rate=1.0, error_window=50)
    return LLMSettings(pool=list(pool), **{**base, **kw})
