"""OpenAI-compatible chat backend (OpenAI, vLLM, SGLang, Ollama, ... via base_url)."""

from __future__ import annotations

import base64
from typing import Any

import openai

from forenset.backends import apiloop
from forenset.backends.llm.base import RawReply, Turns, image_mime
from forenset.backends.llm.jsonout import json_schema_for
from forenset.backends.llm.types import ChatRequest, LLMCallError, ModelSpec
from forenset.backends.retry import error_from_status, openai_errors

__all__ = ["OpenAIChat", "build_body", "error_from_status", "reply_from_completion"]


def build_body(spec: ModelSpec, req: ChatRequest, extra: Turns) -> dict[str, Any]:
    """The chat/completions JSON body (also one line of a Batch API input file)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": req.user}]
    for img in req.images:
        url = f"data:{image_mime(img)};base64,{base64.b64encode(img).decode('ascii')}"
        content.append({"type": "image_url", "image_url": {"url": url}})
    messages: list[dict[str, Any]] = []
    if req.system:
        messages.append({"role": "system", "content": req.system})
    messages.append({"role": "user", "content": content})
    messages += [{"role": role, "content": text} for role, text in extra]
    body: dict[str, Any] = {
        "model": spec.model,
        "messages": messages,
        "temperature": req.temperature,
    }
    if req.max_tokens is not None:
        body["max_tokens"] = req.max_tokens
    if req.seed is not None:
        body["seed"] = req.seed
    if req.response_model is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": req.response_model.__name__[:64],
                "schema": json_schema_for(req.response_model),
                "strict": False,
            },
        }
    body.update(spec.params)
    return body


def reply_from_completion(obj: Any, headers: dict[str, str]) -> RawReply:
    """RawReply from a ChatCompletion (SDK object) or raise a terminal refusal error."""
    choice = obj.choices[0]
    msg = choice.message
    if getattr(msg, "refusal", None):
        raise LLMCallError(f"refused: {msg.refusal}", retryable=False, refused=True)
    if choice.finish_reason == "content_filter":
        raise LLMCallError(
            "refused: content filter stopped the reply", retryable=False, refused=True
        )
    usage = obj.usage
    return RawReply(
        text=msg.content or "",
        input_tokens=int(usage.prompt_tokens) if usage else 0,
        output_tokens=int(usage.completion_tokens) if usage else 0,
        headers=headers,
    )


class OpenAIChat:
    """Chat completions through the process's shared AsyncOpenAI clients (SDK retries off)."""

    name = "openai"

    def client(self, spec: ModelSpec) -> openai.AsyncOpenAI:
        return apiloop.openai_client(spec)

    async def complete(self, spec: ModelSpec, req: ChatRequest, extra: Turns) -> RawReply:
        body = build_body(spec, req, extra)
        params = {k: body.pop(k) for k in list(spec.params)}
        client = self.client(spec)
        with openai_errors(spec.timeout_s):
            raw = await client.chat.completions.with_raw_response.create(
                **body, extra_body=params or None
            )
            obj = raw.parse()
        return reply_from_completion(obj, dict(raw.headers))
