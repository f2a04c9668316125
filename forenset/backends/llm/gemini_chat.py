"""Gemini backend (google-genai SDK, REST): inline image bytes, JSON schema output."""

from __future__ import annotations

from typing import Any

from google import genai
from google.genai import types

from forenset.backends import apiloop
from forenset.backends.llm.base import RawReply, Turns, image_mime
from forenset.backends.llm.jsonout import json_schema_for
from forenset.backends.llm.types import ChatRequest, LLMCallError, ModelSpec
from forenset.backends.retry import genai_errors

_BLOCKED = {
    "SAFETY",
    "PROHIBITED_CONTENT",
    "BLOCKLIST",
    "SPII",
    "RECITATION",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
}


def build_contents(req: ChatRequest, extra: Turns) -> list[types.Content]:
    parts = [types.Part.from_text(text=req.user)]
    parts += [types.Part.from_bytes(data=img, mime_type=image_mime(img)) for img in req.images]
    contents = [types.Content(role="user", parts=parts)]
    for role, text in extra:
        contents.append(
            types.Content(
                role="model" if role == "assistant" else "user",
                parts=[types.Part.from_text(text=text)],
            )
        )
    return contents


def build_config(spec: ModelSpec, req: ChatRequest) -> types.GenerateContentConfig:
    kwargs: dict[str, Any] = {"temperature": req.temperature}
    if req.system:
        kwargs["system_instruction"] = req.system
    if req.max_tokens is not None:
        kwargs["max_output_tokens"] = req.max_tokens
    if req.seed is not None:
        kwargs["seed"] = req.seed
    if req.response_model is not None:
        kwargs["response_mime_type"] = "application/json"
        kwargs["response_json_schema"] = json_schema_for(req.response_model)
    kwargs.update(spec.params)
    return types.GenerateContentConfig(**kwargs)


class GeminiChat:
    """generateContent through the process's shared genai clients (SDK retries off)."""

    name = "gemini"

    def client(self, spec: ModelSpec) -> genai.Client:
        return apiloop.genai_client(spec)

    async def complete(self, spec: ModelSpec, req: ChatRequest, extra: Turns) -> RawReply:
        client = self.client(spec)
        with genai_errors(spec.timeout_s):
            resp = await client.aio.models.generate_content(
                model=spec.model,
                contents=build_contents(req, extra),
                config=build_config(spec, req),
            )
        headers = dict(resp.sdk_http_response.headers or {}) if resp.sdk_http_response else {}
        return reply_from_response(resp, headers)


def reply_from_response(resp: types.GenerateContentResponse, headers: dict[str, str]) -> RawReply:
    """RawReply from a GenerateContentResponse, or a terminal error for blocked replies."""
    feedback = resp.prompt_feedback
    if feedback is not None and feedback.block_reason:
        raise LLMCallError(
            f"refused: prompt blocked ({feedback.block_reason})", retryable=False, refused=True
        )
    cand = resp.candidates[0] if resp.candidates else None
    reason = str(cand.finish_reason.value if cand and cand.finish_reason else "")
    if reason in _BLOCKED:
        raise LLMCallError(f"refused: finish reason {reason}", retryable=False, refused=True)
    parts = (cand.content.parts or []) if cand and cand.content else []
    text = "".join(p.text for p in parts if p.text and not p.thought)
    usage = resp.usage_metadata
    return RawReply(
        text=text,
        input_tokens=int(usage.prompt_token_count or 0) if usage else 0,
        output_tokens=int(usage.candidates_token_count or 0) if usage else 0,
        headers=headers,
        finish_reason="length" if reason == "MAX_TOKENS" else (reason.lower() or None),
        output_mode="json_schema",
    )
