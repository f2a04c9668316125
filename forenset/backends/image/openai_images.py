"""OpenAI Images API backend (gpt-image-1, DALL-E) over the shared API loop and retry rules.

Rate limits, retries, clients and result rows are those of every image-API backend
(api_calls.py); this module only builds the requests and reads the replies. Content-policy
refusals (400 with the Images API's codes) are terminal error rows; settings api.openai.com is
known to refuse (a size or quality the model does not take, DALL-E 3 edits) raise
ConfigurationError before any request.
"""

from __future__ import annotations

import base64
import functools
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from PIL import Image

from forenset.backends import apiloop
from forenset.backends.image.api_calls import (
    ApiImageBackend,
    ImageCall,
    ImageReply,
    png_bytes,
)
from forenset.backends.image.api_config import OpenAIImagesConfig
from forenset.backends.image.base import EditRequest, GenerateRequest, ImageResult
from forenset.backends.llm.secrets import redact
from forenset.backends.llm.types import LLMCallError
from forenset.backends.retry import openai_errors, openai_status_error

if TYPE_CHECKING:
    import openai

    from forenset.backends.image.generator import GeneratorConfig

__all__ = ["OpenAIImageBackend", "OpenAIImagesConfig", "openai_mask", "status_error"]

# What api.openai.com accepts per image model: sizes and qualities. Checked before any request
# only when that is where requests go: an OpenAI-compatible server may accept other values.
_SIZES_QUALITIES = {
    "gpt-image": (
        {"1024x1024", "1536x1024", "1024x1536", "auto"},
        {"low", "medium", "high", "auto"},
    ),
    "dall-e-3": ({"1024x1024", "1792x1024", "1024x1792"}, {"standard", "hd"}),
    "dall-e-2": ({"256x256", "512x512", "1024x1024"}, {"standard"}),
}
_NO_EDITS = {"dall-e-3"}  # images.edit takes gpt-image-* and dall-e-2 only

# OpenAI image refusals arrive as 400s with these codes (besides the chat layer's set).
_IMAGE_POLICY_CODES = {
    "moderation_blocked",
    "content_policy_violation",
    "image_generation_user_error",
}


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
    if exc.status_code == 400 and exc.code in _IMAGE_POLICY_CODES:
        body = exc.body if isinstance(exc.body, dict) else {}
        message = str(body.get("message") or exc.message)
        return LLMCallError(
            f"refused (content policy, {exc.code}): {redact(message)[:300]}",
            retryable=False,
            status=400,
            headers=dict(exc.response.headers),
        )
    return openai_status_error(exc)


class OpenAIImageBackend(ApiImageBackend):
    """Text-to-image (``images.generate``) and editing (``images.edit``) via the OpenAI SDK."""

    name = "openai"
    keyless_without_env = True
    config: OpenAIImagesConfig

    @classmethod
    def tasks_for(cls, generator: GeneratorConfig) -> set[str]:
        """Both, but DALL-E 3 cannot edit."""
        model = (generator.openai or OpenAIImagesConfig()).model
        return {"t2i"} if model in _NO_EDITS else {"edit", "t2i"}

    @classmethod
    def from_generator(cls, generator: GeneratorConfig) -> OpenAIImageBackend:
        """The backend of a generator's ``openai:`` block (defaults when it has none)."""
        return cls(generator.openai or OpenAIImagesConfig())

    def _accepted(self) -> tuple[set[str], set[str]] | None:
        """(sizes, qualities) api.openai.com accepts for this model; None: not known here."""
        # base_url None: the SDK's default, which OPENAI_BASE_URL can point elsewhere
        base = self.config.base_url or os.environ.get("OPENAI_BASE_URL")
        if base is not None and urlsplit(base).hostname != "api.openai.com":
            return None
        model = self.config.model
        return _SIZES_QUALITIES.get("gpt-image" if model.startswith("gpt-image-") else model)

    def check_config(self) -> None:
        accepted = self._accepted()
        if accepted is None:
            return
        sizes, qualities = accepted
        if self.config.size is not None and self.config.size not in sizes:
            raise self.fail(f"does not take size {self.config.size!r} (it takes {_list(sizes)})")
        if self.config.quality is not None and self.config.quality not in qualities:
            raise self.fail(
                f"does not take quality {self.config.quality!r} (it takes {_list(qualities)})"
            )

    def _check_t2i_size(self, size: str) -> None:
        """The request's WxH, sent when ``size`` is not configured, must be one the API takes."""
        accepted = self._accepted()
        if self.config.size is None and accepted is not None and size not in accepted[0]:
            raise self.fail(
                f"cannot make {size} images (it takes {_list(accepted[0])}): set the "
                "generator's t2i_size or openai.size to one of them"
            )

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

    async def _send(self, method: str, kwargs: dict[str, Any]) -> ImageReply:
        client = apiloop.openai_client(self.spec)
        with openai_errors(self.config.timeout_s, status_error):
            api = client.images.with_raw_response
            raw = await (api.generate if method == "generate" else api.edit)(**kwargs)
            obj = raw.parse()
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
            self._check_t2i_size(size)
            kwargs = {**self._base_kwargs(), "prompt": r.prompt, "size": size}
            calls.append(
                ImageCall(
                    item_id=r.item_id,
                    seed=r.seed,
                    send=functools.partial(self._send, "generate", kwargs),
                    params={**self._params(size, r.seed), "requested_size": list(r.size)},
                )
            )
        return self._run(calls)

    def edit(self, requests: list[EditRequest]) -> list[ImageResult]:
        if requests and self.config.model in _NO_EDITS:
            raise self.fail(
                "cannot edit images (the Images API edits with gpt-image-* and dall-e-2)"
            )
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
                    send=functools.partial(self._send, "edit", kwargs),
                    params=params,
                    source_size=src.size,
                )
            )
        return self._run(calls)


def _list(values: set[str]) -> str:
    return ", ".join(sorted(values))
