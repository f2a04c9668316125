"""OpenAI-compatible chat backend (OpenAI, vLLM, SGLang, Ollama, ... via base_url)."""

from __future__ import annotations

import base64
from typing import Any

import openai

from forenset.backends.llm.base import RawReply, Turns, image_mime
from forenset.backends.llm.jsonout import json_schema_for
from forenset.backends.llm.limits import retry_after_from
from forenset.backends.llm.secrets import api_key, redact
from forenset.backends.llm.types import ChatRequest, LLMCallError, ModelSpec

_POLICY_CODES = {"content_policy_violation", "content_filter", "moderation_blocked"}
_SELF_HOSTED_KEY = "not-needed"  # placeholder when api_key_env is None (vLLM/SGLang/Ollama)


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
        raise LLMCallError(f"refused: {msg.refusal}", retryable=False)
    if choice.finish_reason == "content_filter":
        raise LLMCallError("refused: content filter stopped the reply", retryable=False)
    usage = obj.usage
    return RawReply(
        text=msg.content or "",
        input_tokens=int(usage.prompt_tokens) if usage else 0,
        output_tokens=int(usage.completion_tokens) if usage else 0,
        headers=headers,
    )


def error_from_status(
    status: int, message: str, code: str | None, headers: dict[str, str]
) -> LLMCallError:
    """Map an HTTP error to retryable (429/408/409/5xx) or terminal with a reason."""
    message = redact(message)[:300]
    if status == 429:
        return LLMCallError(
            f"HTTP 429 rate limited: {message}",
            retryable=True,
            status=429,
            retry_after_s=retry_after_from(headers),
            throttled=True,
            headers=headers,
        )
    if status >= 500 or status in (408, 409):
        return LLMCallError(
            f"HTTP {status}: {message}",
            retryable=True,
            status=status,
            retry_after_s=retry_after_from(headers),
            headers=headers,
        )
    low = message.lower()
    if status == 400 and (code in _POLICY_CODES or "content policy" in low or "safety" in low):
        return LLMCallError(
            f"refused (content policy): {message}", retryable=False, status=status, headers=headers
        )
    return LLMCallError(
        f"HTTP {status}: {message}", retryable=False, status=status, headers=headers
    )


class OpenAIChat:
    """One AsyncOpenAI client per (base_url, key env, timeout), SDK retries off."""

    name = "openai"

    def __init__(self) -> None:
        self._clients: dict[tuple[str | None, str | None, float], openai.AsyncOpenAI] = {}

    def client(self, spec: ModelSpec) -> openai.AsyncOpenAI:
        ck = (spec.base_url, spec.api_key_env, spec.timeout_s)
        if ck not in self._clients:
            key = api_key(spec.api_key_env)
            if spec.api_key_env and key is None:
                raise LLMCallError(
                    f"environment variable {spec.api_key_env} is not set", retryable=False
                )
            self._clients[ck] = openai.AsyncOpenAI(
                api_key=key or _SELF_HOSTED_KEY,
                base_url=spec.base_url,
                max_retries=0,
                timeout=spec.timeout_s,
            )
        return self._clients[ck]

    async def complete(self, spec: ModelSpec, req: ChatRequest, extra: Turns) -> RawReply:
        body = build_body(spec, req, extra)
        params = {k: body.pop(k) for k in list(spec.params)}
        client = self.client(spec)
        try:
            raw = await client.chat.completions.with_raw_response.create(
                **body, extra_body=params or None
            )
            obj = raw.parse()
        except openai.APITimeoutError as exc:
            raise LLMCallError(f"timeout after {spec.timeout_s:g}s", retryable=True) from exc
        except openai.APIConnectionError as exc:
            raise LLMCallError(f"connection error: {redact(str(exc))}", retryable=True) from exc
        except openai.APIStatusError as exc:
            headers = dict(exc.response.headers)
            body = exc.body if isinstance(exc.body, dict) else {}
            message = str(body.get("message") or exc.message)
            raise error_from_status(exc.status_code, message, exc.code, headers) from None
        return reply_from_completion(obj, dict(raw.headers))
