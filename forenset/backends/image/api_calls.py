"""What the image-API backends (openai_images.py, gemini_images.py) share: one call per item.

Why it is shaped like this:
- Image calls to a provider share its account limits with chat calls, so they run on the
  process's one API loop with the same limiter per (backend, base_url, model), the same cached
  SDK clients (forenset/backends/apiloop.py) and the same attempt / backoff rules
  (forenset/backends/retry.py). Only the result row is image-specific.
- Every attempt is counted and paced by us (SDK ``max_retries=0``): 429 + Retry-After, 5xx,
  timeouts, connection errors and undecodable images back off and retry; refusals and other
  4xx are terminal error rows. Nothing raises out of ``generate`` / ``edit``.
- Edits come back at whatever size the API gives; they are resized to the source photo's
  size (``params["resized_to_source"]``) so masks and pixel diffs line up, as diffusers does.
"""

from __future__ import annotations

import asyncio
import io
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from forenset.backends import apiloop
from forenset.backends.image.base import ImageResult
from forenset.backends.llm.limits import ModelLimiter
from forenset.backends.llm.secrets import api_key, redact
from forenset.backends.llm.types import ModelSpec
from forenset.backends.retry import RetryPolicy, attempt
from forenset.errors import ConfigurationError
from forenset.seeds import derive_seed
from forenset.text.models import ALL_KINDS


@dataclass
class ImageReply:
    """One successful attempt: image bytes, response headers, extra fields to record."""

    data: bytes
    headers: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    image: Image.Image | None = None  # ``data`` decoded, set by the runner


@dataclass
class ImageCall:
    """One item for ``run_image_calls``: how to make one attempt and what to record."""

    item_id: str
    seed: int
    send: Callable[[], Awaitable[ImageReply]]  # one attempt on the API loop; raises LLMCallError
    params: dict[str, Any]
    source_size: tuple[int, int] | None = None  # edits: resize the output back to this


def run_image_calls(
    calls: list[ImageCall], spec: ModelSpec, retry: RetryPolicy, price_per_image: float
) -> list[ImageResult]:
    """Run all calls concurrently on the API loop (bounded by the model's limiter).

    Results come back in input order; failures are error rows, never exceptions.
    """
    if not calls:
        return []

    async def run_all() -> list[ImageResult]:
        limiter = apiloop.limiter_for(spec)
        return list(
            await asyncio.gather(
                *(_run_one(c, spec, limiter, retry, price_per_image) for c in calls)
            )
        )

    return apiloop.submit(run_all())


async def _run_one(
    call: ImageCall, spec: ModelSpec, limiter: ModelLimiter, retry: RetryPolicy, price: float
) -> ImageResult:
    rng = random.Random(derive_seed("image-api", spec.backend, spec.model, call.item_id, call.seed))
    t0 = time.monotonic()

    async def send() -> ImageReply:
        reply = await call.send()
        reply.image = _decode(reply.data)
        return reply

    attempts = 0
    retries = 0
    while True:
        attempts += 1
        sent = await attempt(
            send,
            limiter,
            garbled=(OSError, ValueError),  # undecodable image bytes: a garbled reply
            garbled_reason="undecodable image in reply",
            urgent=attempts > 1,  # a retry goes before fresh calls (see PriorityGate)
        )
        params = {**call.params, "attempts": attempts}
        failure = sent.failure
        if failure is not None:
            if await retry.wait_to_retry(failure, retries, rng):
                retries += 1
                continue
            return ImageResult(
                image=None,
                status="error",
                error=redact(failure.reason),
                retryable=failure.retryable,
                latency_s=time.monotonic() - t0,
                model=spec.model,
                params=params,
            )
        reply = sent.reply
        assert reply is not None and reply.image is not None
        image = reply.image
        params.update(reply.extra)
        params["output_size"] = list(image.size)
        params["cost_usd"] = price
        if call.source_size is not None and image.size != call.source_size:
            image = image.resize(call.source_size, Image.Resampling.LANCZOS)
            params["resized_to_source"] = True
        return ImageResult(
            image=image, latency_s=time.monotonic() - t0, model=spec.model, params=params
        )


def _decode(data: bytes) -> Image.Image:
    with Image.open(io.BytesIO(data)) as img:
        img.load()
        return img.convert("RGB")


def png_bytes(image: Image.Image) -> bytes:
    """Lossless bytes of a photo as sent to the APIs."""
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


class ApiImageBackend:
    """What the image-API backends share: config, model spec for limiter and client, retries.

    Construction fails fast: what would make every request of the backend fail the same way
    (no key, a setting the API is known to refuse) raises ConfigurationError here, once,
    instead of becoming one error row per item."""

    name = ""
    edit_kinds = frozenset(ALL_KINDS)  # an instruction-following editor: every kind
    keyless_without_env = False  # api_key_env None: send a placeholder (self-hosted servers)

    def __init__(self, config: Any) -> None:
        self.config = config
        self.spec = config.model_spec()
        self.retry = RetryPolicy(config.max_retries, config.backoff_base_s, config.backoff_max_s)
        self._check_key()
        self.check_config()

    def _check_key(self) -> None:
        env = self.config.api_key_env
        if env is None and self.keyless_without_env:
            return
        if not env:
            raise ConfigurationError(
                f"The {self.name} image generator (model {self.config.model!r}) needs "
                "api_key_env, the environment variable that holds its API key."
            )
        if api_key(env) is None:
            raise ConfigurationError(
                f"The {self.name} image generator (model {self.config.model!r}) needs an API "
                f"key in the environment variable {env}, which is not set."
            )

    def check_config(self) -> None:
        """Raise ConfigurationError for settings the API is known to refuse (subclasses)."""

    def fail(self, problem: str) -> ConfigurationError:
        """A one-sentence configuration error about this generator."""
        return ConfigurationError(
            f"The {self.name} image generator (model {self.config.model!r}) {problem}."
        )

    def __repr__(self) -> str:  # never shows the key
        return (
            f"{type(self).__name__}(model={self.config.model!r}, base_url={self.config.base_url!r})"
        )

    def config_fingerprint(self) -> dict[str, Any]:
        """What decides the outputs (for shard fingerprints); holds no key."""
        return self.config.model_dump()

    def _run(self, calls: list[ImageCall]) -> list[ImageResult]:
        return run_image_calls(calls, self.spec, self.retry, self.config.price_per_image)
