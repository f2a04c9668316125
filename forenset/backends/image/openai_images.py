"""OpenAI Images API backend (gpt-image-1, DALL-E) over the chat layer's rate-limit machinery.

Why it is shaped like this:
- Image calls to a provider share its account limits with chat calls, so they go through the
  same process-wide engine (forenset/backends/llm/engine.py): its single event loop, its
  limiter registry keyed by (backend, base_url, model), its cached SDK clients (key lookup
  from ``api_key_env``, SDK retries off) and its backoff rule. Only the per-item retry loop
  is image-specific (``run_image_calls``, also used by the Gemini backend).
- Every attempt is counted and paced by us (SDK ``max_retries=0``): 429 + Retry-After, 5xx,
  timeouts and connection errors back off and retry; content-policy refusals and other 4xx
  are terminal error rows. Nothing raises out of ``generate`` / ``edit``.
- Edits come back at whatever size the API gives; they are resized to the source photo's
  size (``params["resized_to_source"]``) so masks and pixel diffs line up, as diffusers does.
"""

from __future__ import annotations

import asyncio
import base64
import io
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import openai
from PIL import Image

from forenset.backends.image.api_config import OpenAIImagesConfig
from forenset.backends.image.base import EditRequest, GenerateRequest, ImageResult
from forenset.backends.llm.engine import Engine, engine
from forenset.backends.llm.openai_chat import error_from_status
from forenset.backends.llm.secrets import redact
from forenset.backends.llm.types import LLMCallError, LLMSettings, ModelSpec
from forenset.seeds import derive_seed

# OpenAI image refusals arrive as 400s with these codes (besides the chat layer's set).
_IMAGE_POLICY_CODES = {
    "moderation_blocked",
    "content_policy_violation",
    "image_generation_user_error",
}


@dataclass
class RetryPolicy:
    max_retries: int
    backoff_base_s: float
    backoff_max_s: float

    def settings(self, spec: ModelSpec) -> LLMSettings:
        """LLMSettings only carry the backoff numbers into Engine.backoff."""
        return LLMSettings(
            pool=[spec],
            max_retries=self.max_retries,
            backoff_base_s=self.backoff_base_s,
            backoff_max_s=self.backoff_max_s,
        )


@dataclass
class ImageReply:
    """One successful attempt: image bytes, response headers, extra fields to record."""

    data: bytes
    headers: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ImageCall:
    """One item for ``run_image_calls``: how to make one attempt and what to record."""

    item_id: str
    seed: int
    send: Callable[[Engine], Awaitable[ImageReply]]  # one attempt; raises LLMCallError
    params: dict[str, Any]
    source_size: tuple[int, int] | None = None  # edits: resize the output back to this


def run_image_calls(
    calls: list[ImageCall], spec: ModelSpec, retry: RetryPolicy, price_per_image: float
) -> list[ImageResult]:
    """Run all calls concurrently on the engine loop (bounded by the model's limiter).

    Results come back in input order; failures are error rows, never exceptions.
    """
    if not calls:
        return []
    eng = engine()

    async def run_all() -> list[ImageResult]:
        return list(
            await asyncio.gather(*(_run_one(eng, c, spec, retry, price_per_image) for c in calls))
        )

    return eng.submit(run_all())


async def _run_one(
    eng: Engine, call: ImageCall, spec: ModelSpec, retry: RetryPolicy, price: float
) -> ImageResult:
    limiter = eng.limiter_for(spec)
    settings = retry.settings(spec)
    rng = random.Random(derive_seed("image-api", spec.backend, spec.model, call.item_id, call.seed))
    t0 = time.monotonic()
    attempts = 0
    retries = 0
    while True:
        attempts += 1
        reply: ImageReply | None = None
        failure: LLMCallError | None = None
        await limiter.acquire(0)
        try:
            reply = await call.send(eng)
            image = _decode(reply.data)
        except LLMCallError as exc:
            failure = exc
        except (OSError, ValueError) as exc:  # undecodable image bytes: a garbled reply
            failure = LLMCallError(f"undecodable image in reply: {exc}", retryable=True)
        except Exception as exc:  # an SDK surprise is one item's error, not a crash
            reason = f"unexpected {type(exc).__name__}: {redact(str(exc))[:300]}"
            failure = LLMCallError(reason, retryable=False)
        finally:
            await limiter.release(est_tokens=0, used_tokens=None)
        params = {**call.params, "attempts": attempts}
        if failure is not None:
            limiter.update_from_headers(failure.headers)
            if failure.throttled:
                limiter.on_throttle(failure.retry_after_s)
            if failure.retryable and retries < retry.max_retries:
                retries += 1
                await asyncio.sleep(Engine.backoff(settings, retries, failure, rng))
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
        assert reply is not None
        limiter.update_from_headers(reply.headers)
        limiter.concurrency.on_success()
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
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def openai_mask(mask: Image.Image, size: tuple[int, int]) -> bytes:
    """Our masks are white where to edit; OpenAI edits where the mask PNG is transparent."""
    m = mask.convert("L")
    if m.size != size:
        m = m.resize(size, Image.Resampling.NEAREST)
    rgba = Image.new("RGBA", size, (0, 0, 0, 255))
    rgba.putalpha(m.point(lambda v: 255 - v))
    return png_bytes(rgba)


def status_error(exc: openai.APIStatusError) -> LLMCallError:
    """The chat layer's HTTP mapping, plus the Images API's refusal codes."""
    headers = dict(exc.response.headers)
    body = exc.body if isinstance(exc.body, dict) else {}
    message = str(body.get("message") or exc.message)
    if exc.status_code == 400 and exc.code in _IMAGE_POLICY_CODES:
        return LLMCallError(
            f"refused (content policy, {exc.code}): {redact(message)[:300]}",
            retryable=False,
            status=400,
            headers=headers,
        )
    return error_from_status(exc.status_code, message, exc.code, headers)


class ApiImageBackend:
    """What the image-API backends share: config, chat-layer model spec, retry policy."""

    name = ""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.spec = config.model_spec()
        self.retry = RetryPolicy(config.max_retries, config.backoff_base_s, config.backoff_max_s)

    def __repr__(self) -> str:  # never shows the key
        return (
            f"{type(self).__name__}(model={self.config.model!r}, base_url={self.config.base_url!r})"
        )

    def config_fingerprint(self) -> dict[str, Any]:
        """What decides the outputs (for shard fingerprints); holds no key."""
        return self.config.model_dump()


class OpenAIImageBackend(ApiImageBackend):
    """Text-to-image (``images.generate``) and editing (``images.edit``) via the OpenAI SDK."""

    name = "openai"
    config: OpenAIImagesConfig

    def _base_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": self.config.model, "n": 1}
        if self.config.quality:
            kw["quality"] = self.config.quality
        if self.config.model.startswith("dall-e"):
            kw["response_format"] = "b64_json"  # gpt-image-* always return b64_json
        if self.config.params:
            kw["extra_body"] = dict(self.config.params)
        return kw

    def _params(self, size: str | None, seed: int) -> dict[str, Any]:
        return {
            "size": size,
            "quality": self.config.quality,
            "n": 1,
            "seed": seed,  # not sent: the Images API takes no seed
            **self.config.params,
        }

    async def _send(self, eng: Engine, method: str, kwargs: dict[str, Any]) -> ImageReply:
        timeout = self.config.timeout_s
        try:
            client = eng.backends["openai"].client(self.spec)  # type: ignore[attr-defined]
            api = client.images.with_raw_response
            raw = await (api.generate if method == "generate" else api.edit)(**kwargs)
            obj = raw.parse()
        except openai.APITimeoutError as exc:
            raise LLMCallError(f"timeout after {timeout:g}s", retryable=True) from exc
        except openai.APIConnectionError as exc:
            raise LLMCallError(f"connection error: {redact(str(exc))}", retryable=True) from exc
        except openai.APIStatusError as exc:
            raise status_error(exc) from None
        items = obj.data or []
        if not items or not items[0].b64_json:
            raise LLMCallError("reply carried no b64_json image", retryable=False)
        extra: dict[str, Any] = {}
        if items[0].revised_prompt:
            extra["revised_prompt"] = items[0].revised_prompt
        return ImageReply(base64.b64decode(items[0].b64_json), dict(raw.headers), extra)

    def generate(self, requests: list[GenerateRequest]) -> list[ImageResult]:
        calls = []
        for r in requests:
            size = self.config.size or f"{r.size[0]}x{r.size[1]}"
            kwargs = {**self._base_kwargs(), "prompt": r.prompt, "size": size}
            calls.append(
                ImageCall(
                    item_id=r.item_id,
                    seed=r.seed,
                    send=lambda eng, kw=kwargs: self._send(eng, "generate", kw),
                    params={**self._params(size, r.seed), "requested_size": list(r.size)},
                )
            )
        return run_image_calls(calls, self.spec, self.retry, self.config.price_per_image)

    def edit(self, requests: list[EditRequest]) -> list[ImageResult]:
        calls = []
        for r in requests:
            src = r.image.convert("RGB")
            images: list[tuple[str, bytes, str]] = [("image.png", png_bytes(src), "image/png")]
            if r.donor is not None:
                images.append(("donor.png", png_bytes(r.donor.convert("RGB")), "image/png"))
            kwargs = {
                **self._base_kwargs(),
                "prompt": str(r.instruction.get("text", "")),
                "image": images[0] if len(images) == 1 else images,
            }
            if self.config.size:
                kwargs["size"] = self.config.size
            if r.mask is not None:
                kwargs["mask"] = ("mask.png", openai_mask(r.mask, src.size), "image/png")
            params = self._params(self.config.size, r.seed)
            params.update(masked=r.mask is not None, donor=r.donor is not None)
            calls.append(
                ImageCall(
                    item_id=r.item_id,
                    seed=r.seed,
                    send=lambda eng, kw=kwargs: self._send(eng, "edit", kw),
                    params=params,
                    source_size=src.size,
                )
            )
        return run_image_calls(calls, self.spec, self.retry, self.config.price_per_image)
