"""Gemini backend (google-genai SDK, REST): inline image bytes, JSON schema output."""

from __future__ import annotations

import re
from typing import Any

import httpx
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from forenset.backends.llm.base import RawReply, Turns, image_mime
from forenset.backends.llm.jsonout import json_schema_for
from forenset.backends.llm.limits import retry_after_from
from forenset.backends.llm.openai_chat import error_from_status
from forenset.backends.llm.secrets import api_key, redact
from forenset.backends.llm.types import ChatRequest, LLMCallError, ModelSpec

try:  # google-genai prefers the httpx2 fork when it is installed
    import httpx2

    _TIMEOUTS: tuple[type[BaseException], ...] = (httpx.TimeoutException, httpx2.TimeoutException)
    _TRANSPORT: tuple[type[BaseException], ...] = (httpx.TransportError, httpx2.TransportError)
    _ASYNC_TRANSPORT: Any = httpx2.AsyncHTTPTransport
except ImportError:  # pragma: no cover - depends on the environment
    _TIMEOUTS, _TRANSPORT = (httpx.TimeoutException,), (httpx.TransportError,)
    _ASYNC_TRANSPORT = httpx.AsyncHTTPTransport

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


def _retry_delay(details: Any) -> float | None:
    """Seconds from a google.rpc.RetryInfo detail ('2s', '0.5s')."""
    try:
        for d in details["error"].get("details", []):
            if str(d.get("@type", "")).endswith("RetryInfo"):
                m = re.match(r"([\d.]+)s", str(d.get("retryDelay", "")))
                if m:
                    return float(m.group(1))
    except (KeyError, TypeError, AttributeError):
        return None
    return None


class GeminiChat:
    """One genai.Client per (base_url, key env, timeout, api_version), SDK retries off."""

    name = "gemini"

    def __init__(self) -> None:
        self._clients: dict[tuple[Any, ...], genai.Client] = {}

    def client(self, spec: ModelSpec) -> genai.Client:
        ck = (spec.base_url, spec.api_key_env, spec.timeout_s, spec.api_version)
        if ck not in self._clients:
            key = api_key(spec.api_key_env)
            if key is None:
                raise LLMCallError(
                    f"environment variable {spec.api_key_env or '(api_key_env unset)'} is not set",
                    retryable=False,
                )
            opts = types.HttpOptions(
                base_url=spec.base_url,
                api_version=spec.api_version or "v1beta",
                timeout=int(spec.timeout_s * 1000),
                retry_options=types.HttpRetryOptions(attempts=1),
                # An explicit transport pins the SDK to httpx: with aiohttp installed (ray[default]
                # pulls it in) google-genai would send async requests through aiohttp, where our
                # timeouts, exception mapping and key-scrubbed request logs do not apply.
                async_client_args={"transport": _ASYNC_TRANSPORT()},
            )
            self._clients[ck] = genai.Client(api_key=key, http_options=opts)
        return self._clients[ck]

    async def complete(self, spec: ModelSpec, req: ChatRequest, extra: Turns) -> RawReply:
        client = self.client(spec)
        try:
            resp = await client.aio.models.generate_content(
                model=spec.model,
                contents=build_contents(req, extra),
                config=build_config(spec, req),
            )
        except genai_errors.APIError as exc:
            headers = dict(exc.response.headers) if getattr(exc, "response", None) else {}
            err = error_from_status(
                int(exc.code or 500), str(exc.message or exc), exc.status, headers
            )
            if err.retry_after_s is None:
                err.retry_after_s = _retry_delay(exc.details) or retry_after_from(headers)
            raise err from None
        except _TIMEOUTS as exc:
            raise LLMCallError(f"timeout after {spec.timeout_s:g}s", retryable=True) from exc
        except _TRANSPORT as exc:
            raise LLMCallError(f"connection error: {redact(str(exc))}", retryable=True) from exc
        headers = dict(resp.sdk_http_response.headers or {}) if resp.sdk_http_response else {}
        return reply_from_response(resp, headers)


def reply_from_response(resp: types.GenerateContentResponse, headers: dict[str, str]) -> RawReply:
    """RawReply from a GenerateContentResponse, or a terminal error for blocked replies."""
    feedback = resp.prompt_feedback
    if feedback is not None and feedback.block_reason:
        raise LLMCallError(f"refused: prompt blocked ({feedback.block_reason})", retryable=False)
    cand = resp.candidates[0] if resp.candidates else None
    reason = str(cand.finish_reason.value if cand and cand.finish_reason else "")
    if reason in _BLOCKED:
        raise LLMCallError(f"refused: finish reason {reason}", retryable=False)
    parts = (cand.content.parts or []) if cand and cand.content else []
    text = "".join(p.text for p in parts if p.text and not p.thought)
    usage = resp.usage_metadata
    return RawReply(
        text=text,
        input_tokens=int(usage.prompt_token_count or 0) if usage else 0,
        output_tokens=int(usage.candidates_token_count or 0) if usage else 0,
        headers=headers,
    )
