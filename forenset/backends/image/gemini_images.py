"""Gemini image backend (gemini-2.5-flash-image, ...) via google-genai generate_content.

Why it is shaped like this: Gemini makes and edits images through the ordinary
``generateContent`` call with ``response_modalities=["TEXT", "IMAGE"]``, so it shares the
process's cached ``genai.Client`` (SDK retries off, key from ``api_key_env``), limiter and
backoff through ``run_image_calls`` (see api_calls.py). A reply without an image part is
the model declining (finish reason SAFETY, a blocked prompt, or a text-only answer): a
terminal error row carrying the model's reason, never a retry.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from PIL import Image

from forenset.backends import apiloop
from forenset.backends.image.api_calls import ApiImageBackend, ImageCall, ImageReply, png_bytes
from forenset.backends.image.api_config import GeminiImagesConfig
from forenset.backends.image.base import EditRequest, GenerateRequest, ImageResult
from forenset.backends.llm.types import LLMCallError
from forenset.backends.retry import genai_errors

if TYPE_CHECKING:
    from google.genai import types

    from forenset.backends.image.generator import GeneratorConfig

__all__ = ["GeminiImageBackend", "GeminiImagesConfig", "image_from_response"]

_API_VERSIONS = {"v1", "v1beta", "v1alpha"}
_ASPECT = re.compile(r"^[1-9]\d*:[1-9]\d*$")

# Finish reasons that mean "declined" (besides the chat layer's set).
_DECLINED = {
    "SAFETY",
    "PROHIBITED_CONTENT",
    "BLOCKLIST",
    "SPII",
    "RECITATION",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
    "IMAGE_OTHER",
    "NO_IMAGE",
    "OTHER",
}


def image_from_response(resp: types.GenerateContentResponse) -> tuple[bytes, dict[str, Any]]:
    """The first inline image of a reply (and its text), or a terminal refusal error."""
    feedback = resp.prompt_feedback
    if feedback is not None and feedback.block_reason:
        reason = getattr(feedback.block_reason, "value", feedback.block_reason)
        raise LLMCallError(f"refused: prompt blocked ({reason})", retryable=False)
    cand = resp.candidates[0] if resp.candidates else None
    finish = str(cand.finish_reason.value) if cand and cand.finish_reason else ""
    parts = (cand.content.parts or []) if cand and cand.content else []
    text = " ".join(p.text for p in parts if p.text and not p.thought).strip()
    for p in parts:
        blob = p.inline_data
        if blob is not None and blob.data and (blob.mime_type or "").startswith("image/"):
            extra: dict[str, Any] = {"finish_reason": finish}
            if text:
                extra["model_text"] = text[:500]
            return blob.data, extra
    if finish in _DECLINED:
        detail = f": {text[:200]}" if text else ""
        raise LLMCallError(f"refused: finish reason {finish}{detail}", retryable=False)
    raise LLMCallError(
        f"refused: reply had no image (finish reason {finish or 'none'}): {text[:200]}",
        retryable=False,
    )


class GeminiImageBackend(ApiImageBackend):
    """Text-to-image and instruction editing through Gemini's IMAGE response modality."""

    name = "gemini"
    tasks = frozenset({"edit", "t2i"})
    config: GeminiImagesConfig

    @classmethod
    def from_generator(cls, generator: GeneratorConfig) -> GeminiImageBackend:
        """The backend of a generator's ``gemini:`` block (defaults when it has none)."""
        return cls(generator.gemini or GeminiImagesConfig())

    def check_config(self) -> None:
        """Settings every request would carry are checked once, by the SDK's own model."""
        from pydantic import ValidationError

        if self.config.api_version not in _API_VERSIONS:
            raise self.fail(
                f"has api_version {self.config.api_version!r} (expected one of "
                f"{', '.join(sorted(_API_VERSIONS))})"
            )
        if self.config.aspect_ratio is not None and not _ASPECT.match(self.config.aspect_ratio):
            raise self.fail(
                f"has aspect_ratio {self.config.aspect_ratio!r}, not of the form 'W:H' like '3:2'"
            )
        try:
            self._gen_config(0)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "(config)"
            raise self.fail(
                f"has params the Gemini API does not take ({where}: {err['msg']})"
            ) from None

    def _gen_config(self, seed: int) -> types.GenerateContentConfig:
        from google.genai import types  # not at import: the factory reads ``tasks`` cheaply

        kw: dict[str, Any] = {"response_modalities": ["TEXT", "IMAGE"]}
        if self.config.send_seed:
            kw["seed"] = int(seed) % 2**31
        if self.config.aspect_ratio:
            kw["image_config"] = types.ImageConfig(aspect_ratio=self.config.aspect_ratio)
        kw.update(self.config.params)
        return types.GenerateContentConfig(**kw)

    def _params(self, seed: int) -> dict[str, Any]:
        return {
            "aspect_ratio": self.config.aspect_ratio,
            "n": 1,
            "seed": seed,
            "seed_sent": self.config.send_seed,
            **self.config.params,
        }

    async def _send(self, contents: list[Any], seed: int) -> ImageReply:
        client = apiloop.genai_client(self.spec)
        with genai_errors(self.config.timeout_s):
            resp = await client.aio.models.generate_content(
                model=self.config.model, contents=contents, config=self._gen_config(seed)
            )
        data, extra = image_from_response(resp)
        headers = dict(resp.sdk_http_response.headers or {}) if resp.sdk_http_response else {}
        return ImageReply(data, headers, extra)

    def generate(self, requests: list[GenerateRequest]) -> list[ImageResult]:
        calls = [
            ImageCall(
                item_id=r.item_id,
                seed=r.seed,
                send=functools.partial(self._send, [r.prompt], r.seed),
                params={**self._params(r.seed), "requested_size": list(r.size)},
            )
            for r in requests
        ]
        return self._run(calls)

    def edit(self, requests: list[EditRequest]) -> list[ImageResult]:
        from google.genai import types

        calls = []
        for r in requests:
            src: Image.Image = r.image.convert("RGB")
            contents: list[Any] = [
                types.Part.from_bytes(data=png_bytes(src), mime_type="image/png")
            ]
            if r.donor is not None:
                donor = png_bytes(r.donor.convert("RGB"))
                contents.append(types.Part.from_bytes(data=donor, mime_type="image/png"))
            contents.append(str(r.instruction.get("text", "")))
            params = self._params(r.seed)
            params.update(donor=r.donor is not None, mask_ignored=r.mask is not None)
            calls.append(
                ImageCall(
                    item_id=r.item_id,
                    seed=r.seed,
                    send=functools.partial(self._send, contents, r.seed),
                    params=params,
                    source_size=src.size,
                )
            )
        return self._run(calls)
