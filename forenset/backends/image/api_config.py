"""Configs of the image-API generators, importable without the OpenAI and Gemini SDKs (the
build config embeds them; the backends in openai_images.py / gemini_images.py import them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from forenset.backends.llm.types import ModelSpec
from forenset.confbase import operational


class _ImageAPIConfig(BaseModel):
    """What every image-API generator shares: the provider's limits, our retries, the price."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rpm: float | None = operational(None, gt=0)
    max_concurrency: int = operational(4, ge=1)
    timeout_s: float = operational(120.0, gt=0)
    max_retries: int = operational(5, ge=0)
    backoff_base_s: float = operational(1.0, ge=0)
    backoff_max_s: float = operational(60.0, ge=0)
    price_per_image: float = operational(0.0, ge=0)  # USD, recorded as params["cost_usd"]
    params: dict[str, Any] = Field(default_factory=dict)  # extra request fields, passed through

    def _spec(self, backend: Literal["openai", "gemini"], **extra: Any) -> ModelSpec:
        """The chat layer's spec for this model: selects the shared limiter and SDK client."""
        return ModelSpec(
            backend=backend,
            model=self.model,  # type: ignore[attr-defined]
            base_url=self.base_url,  # type: ignore[attr-defined]
            api_key_env=self.api_key_env,  # type: ignore[attr-defined]
            rpm=self.rpm,
            max_concurrency=self.max_concurrency,
            timeout_s=self.timeout_s,
            **extra,
        )


class OpenAIImagesConfig(_ImageAPIConfig):
    """One OpenAI-compatible image generator; the key is named by env var, never stored.
    ``params``: extra body fields (background, ...)."""

    model: str = "gpt-image-1"
    base_url: str | None = None  # None: api.openai.com
    api_key_env: str | None = operational(
        "OPENAI_API_KEY"
    )  # None: placeholder key (self-hosted servers)
    size: str | None = None  # "1024x1024", "1536x1024", "auto"; None: generate sends "WxH"
    quality: str | None = None  # gpt-image-1: low | medium | high | auto

    def model_spec(self) -> ModelSpec:
        return self._spec("openai")


class GeminiImagesConfig(_ImageAPIConfig):
    """One Gemini image generator; the key is named by env var, never stored.
    ``params``: extra GenerateContentConfig fields."""

    model: str = "gemini-2.5-flash-image"
    base_url: str | None = None  # None: generativelanguage.googleapis.com
    api_key_env: str = operational("GEMINI_API_KEY")
    api_version: str = "v1beta"
    aspect_ratio: str | None = None  # ImageConfig.aspect_ratio, e.g. "1:1", "3:2"
    send_seed: bool = True  # GenerateContentConfig.seed from the request's seed

    def model_spec(self) -> ModelSpec:
        return self._spec("gemini", api_version=self.api_version)
