"""A loopback fake of the Gemini REST API (generateContent) for tests and benchmarks.

Serves POST /{v1,v1beta}/models/{model}:generateContent, and batch mode with inlined
requests (POST .../models/{model}:batchGenerateContent, GET .../batches/{id}). With a
response schema (``responseJsonSchema`` or ``responseSchema``) the default reply is JSON
satisfying it, built from the request text; with ``responseModalities`` containing IMAGE
the reply also carries an inline PNG (the input image edited, or one derived from the
prompt). Use with the real SDK: ``genai.Client(api_key="x",
http_options=HttpOptions(base_url=server.base_url, api_version="v1beta"))``.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from forenset.testing._base import (
    FakeServer,
    Fault,
    Reply,
    b64,
    edited_png,
    estimate_tokens,
    instance_for_schema,
    png_bytes,
)

__all__ = ["FakeGemini", "Fault", "decode_b64", "request_text", "request_images"]

_ROUTE = re.compile(r"^/(v1|v1beta|v1alpha)/models/([^/:]+):generateContent$")
_BATCH_ROUTE = re.compile(r"^/(v1|v1beta|v1alpha)/models/([^/:]+):batchGenerateContent$")
_BATCH_GET = re.compile(r"^/(v1|v1beta|v1alpha)/(batches/[^/:]+)$")
_ids = itertools.count(1)
_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def _parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for content in body.get("contents", []):
        out.extend(content.get("parts", []))
    return out


def request_text(body: dict[str, Any]) -> str:
    """System instruction and all text parts of a generateContent request."""
    system = body.get("systemInstruction") or {}
    texts = [p.get("text", "") for p in system.get("parts", [])]
    texts += [p["text"] for p in _parts(body) if "text" in p]
    return "\n".join(texts)


def last_user_text(body: dict[str, Any]) -> str:
    for content in reversed(body.get("contents", [])):
        if content.get("role", "user") == "user":
            return "\n".join(p["text"] for p in content.get("parts", []) if "text" in p)
    return ""


def decode_b64(data: str) -> bytes:
    """Base64 in either alphabet: google-genai sends inline bytes URL-safe (``-_``)."""
    text = data.strip().replace("+", "-").replace("/", "_")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def request_images(body: dict[str, Any]) -> list[bytes]:
    """Decoded inline image bytes of a generateContent request, in order."""
    return [decode_b64(p["inlineData"]["data"]) for p in _parts(body) if "inlineData" in p]


class FakeGemini(FakeServer):
    """Scriptable Gemini fake; see FakeServer for faults / latency / rate limits.

    reply(body) -> str | dict: the model's text for a request (default: schema echo).
    image_reply(prompt, input_image_or_None, body) -> PNG bytes for IMAGE modality replies.

    Like the real API, a reply longer than ``generationConfig.maxOutputTokens`` (four
    characters a token) is cut there with ``finishReason: MAX_TOKENS``, and ``modelVersion``
    echoes whatever model name was asked for. The knobs of FakeOpenAI's real-server
    behaviours, for Gemini-compatible servers that are not Google's (a self-hosted gateway,
    a local model behind a Gemini-shaped API): json_schema: False answers a response schema
    (``responseJsonSchema`` / ``responseSchema``) as a bad request; list_content: False
    answers a request with any non-text part (an inline image) as a bad request (a text-only
    model); ``bad_request_status``, ``retry_after`` (False: 429s carry neither Retry-After
    nor a RetryInfo detail), ``ratelimit_headers`` (off by default: no x-ratelimit-*) and
    ``serial`` as in FakeServer. ``like_local()`` sets them all as such a server would.
    """

    SCHEMA_ERROR = "responseJsonSchema is not supported by this model"
    PARTS_ERROR = "only text parts are supported: inlineData is not supported by this model"

    @classmethod
    def like_local(cls, **kw: Any) -> FakeGemini:
        """A fake that answers as a one-slot local server behind a Gemini-shaped API: no
        response schema, text parts only, 500 for bad requests, no Retry-After, serial."""
        base = dict(
            json_schema=False,
            list_content=False,
            bad_request_status=500,
            retry_after=False,
            serial=True,
        )
        return cls(**{**base, **kw})

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        rate_limit_rps: float | None = None,
        ratelimit_headers: bool = False,
        strict_window: bool = False,
        reply: Callable[[dict[str, Any]], str | dict[str, Any]] | None = None,
        image_reply: Callable[[str, bytes | None, dict[str, Any]], bytes] | None = None,
        batch_polls_to_complete: int = 1,
        batch_expire_after: int | None = None,
        json_schema: bool = True,
        list_content: bool = True,
        bad_request_status: int = 400,
        retry_after: bool = True,
        serial: bool = False,
    ) -> None:
        super().__init__(
            latency_s=latency_s,
            rate_limit_rps=rate_limit_rps,
            ratelimit_headers=ratelimit_headers,
            strict_window=strict_window,
            retry_after=retry_after,
            bad_request_status=bad_request_status,
            serial=serial,
        )
        self.json_schema = json_schema
        self.list_content = list_content
        self.reply = reply
        self.image_reply = image_reply
        self.batch_polls_to_complete = batch_polls_to_complete
        self.batch_expire_after = batch_expire_after
        self.batches: dict[str, dict[str, Any]] = {}

    @property
    def base_url(self) -> str:
        """Pass as HttpOptions.base_url; the SDK appends /{api_version}/models/..."""
        return self.root_url

    def route(self, h: BaseHTTPRequestHandler, method: str, path: str, body: bytes) -> None:
        m = _ROUTE.match(path)
        if method == "POST" and m:
            return self._generate(h, m.group(2), json.loads(body))
        m = _BATCH_ROUTE.match(path)
        if method == "POST" and m:
            return self._batch_create(h, m.group(2), json.loads(body))
        m = _BATCH_GET.match(path)
        if method == "GET" and m:
            return self._batch_get(h, m.group(2))
        self.send_json(
            h, 404, {"error": {"code": 404, "message": f"no route {path}", "status": "NOT_FOUND"}}
        )

    def default_reply(self, body: dict[str, Any]) -> str | dict[str, Any]:
        cfg = body.get("generationConfig") or {}
        schema = cfg.get("responseJsonSchema") or cfg.get("responseSchema")
        text = last_user_text(body)
        if schema:
            return instance_for_schema(schema, text)
        n_img = len(request_images(body))
        return f"echo: {text[:200]}" + (f" [{n_img} images]" if n_img else "")

    def error_body(self, fault: Fault) -> Reply:
        status = int(fault.status or 500)
        headers = dict(fault.headers)
        details: list[dict[str, Any]] = []
        if fault.retry_after_s is not None and self.retry_after:
            headers.update(self.retry_headers(fault.retry_after_s))
            details.append(
                {
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": f"{fault.retry_after_s}s",
                }
            )
        err = {
            "code": status,
            "message": fault.message or f"injected error {status}",
            "status": _STATUS.get(status, "UNKNOWN"),
            "details": details,
        }
        return status, {"error": err}, headers

    def _error(self, h: BaseHTTPRequestHandler, fault: Fault) -> None:
        status, obj, headers = self.error_body(fault)
        self.send_json(h, status, obj, headers)

    def bad_request(self, body: dict[str, Any]) -> str | None:
        """Why this server would reject the request's form (see the knobs), or None."""
        cfg = body.get("generationConfig") or {}
        if not self.json_schema and (cfg.get("responseJsonSchema") or cfg.get("responseSchema")):
            return self.SCHEMA_ERROR
        if not self.list_content and any("text" not in p for p in _parts(body)):
            return self.PARTS_ERROR
        return None

    def _generate(self, h: BaseHTTPRequestHandler, model: str, body: dict[str, Any]) -> None:
        self.record(h, {**body, "_model": model})
        wait = self.throttle_wait()
        if wait > 0:
            return self._error(h, Fault(status=429, retry_after_s=wait, message="quota"))
        reply = self.serially(h, lambda: self._produce(h, model, body))
        if reply is not None:
            self.send_json(h, *reply)

    def _produce(self, h: BaseHTTPRequestHandler, model: str, body: dict[str, Any]) -> Reply | None:
        fault = self.next_fault(body)
        if fault and fault.delay_s:
            time.sleep(fault.delay_s)
        if fault and fault.drop:
            self.drop(h)
            return None
        if fault and fault.raw_body is not None:
            self.send_bytes(h, 200, fault.raw_body, "application/json")
            return None
        self.work(self.latency_s)
        if fault and fault.status == 401 and fault.message is None:
            key = h.headers.get("x-goog-api-key", "")
            fault = Fault(status=401, message=f"API key not valid: {key}")
        return self.response(model, body, fault)

    def response(self, model: str, body: dict[str, Any], fault: Fault | None) -> Reply:
        """Status, GenerateContentResponse (or error) and headers (shared with batches)."""
        if fault and fault.status:
            return self.error_body(fault)
        bad = self.bad_request(body)
        if bad is not None:
            return self.error_body(Fault(status=self.bad_request_status, message=bad))
        headers = dict(fault.headers) if fault else {}
        prompt_tokens = estimate_tokens(request_text(body)) + 258 * len(request_images(body))
        if fault and fault.refusal is not None:
            candidate: dict[str, Any] = {
                "finishReason": "SAFETY",
                "index": 0,
                "safetyRatings": [
                    {"category": "HARM_CATEGORY_HARASSMENT", "probability": "HIGH", "blocked": True}
                ],
            }
            usage = {"promptTokenCount": prompt_tokens, "totalTokenCount": prompt_tokens}
            obj = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model}
            return 200, obj, headers
        if fault and fault.content is not None:
            text = fault.content
        else:
            made = (self.reply or self.default_reply)(body)
            text = made if isinstance(made, str) else json.dumps(made)
        finish = "STOP"
        limit = (body.get("generationConfig") or {}).get("maxOutputTokens")
        if limit and estimate_tokens(text) > int(limit):
            text, finish = text[: 4 * int(limit)], "MAX_TOKENS"
        parts: list[dict[str, Any]] = [{"text": text}]
        modalities = [
            m.upper() for m in (body.get("generationConfig") or {}).get("responseModalities", [])
        ]
        if "IMAGE" in modalities:
            images = request_images(body)
            prompt = last_user_text(body)
            if self.image_reply is not None:
                png = self.image_reply(prompt, images[0] if images else None, body)
            elif images:
                png = edited_png(images[0], prompt)
            else:
                png = png_bytes(prompt)
            parts.append({"inlineData": {"mimeType": "image/png", "data": b64(png)}})
        out_tokens = estimate_tokens(text)
        obj = {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": prompt_tokens,
                "candidatesTokenCount": out_tokens,
                "totalTokenCount": prompt_tokens + out_tokens,
            },
            "modelVersion": model,
        }
        return 200, obj, headers

    # -- batches (inlined requests) ------------------------------------------------------
    def _batch_create(self, h: BaseHTTPRequestHandler, model: str, body: dict[str, Any]) -> None:
        batch = body.get("batch") or {}
        reqs = ((batch.get("inputConfig") or {}).get("requests") or {}).get("requests") or []
        with self.lock:
            name = f"batches/{next(_ids)}"
            meta = {
                "@type": "type.googleapis.com/google.ai.generativelanguage.GenerateContentBatch",
                "name": name,
                "model": f"models/{model}",
                "displayName": batch.get("displayName", ""),
                "state": "BATCH_STATE_PENDING",
                "createTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            self.batches[name] = {"meta": meta, "requests": reqs, "polls": 0, "model": model}
        self.send_json(h, 200, {"name": name, "metadata": meta})

    def _batch_get(self, h: BaseHTTPRequestHandler, name: str) -> None:
        batch = self.batches.get(name)
        if batch is None:
            return self._error(h, Fault(status=404, message=f"no {name}"))
        with self.lock:
            batch["polls"] += 1
            meta = batch["meta"]
            if meta["state"] in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
                if batch["polls"] < self.batch_polls_to_complete:
                    meta["state"] = "BATCH_STATE_RUNNING"
                else:
                    self._finish_batch(batch)
        self.send_json(h, 200, {"name": name, "metadata": batch["meta"], "done": True})

    def _finish_batch(self, batch: dict[str, Any]) -> None:
        reqs = batch["requests"]
        expired = self.batch_expire_after is not None and self.batch_expire_after < len(reqs)
        answered = reqs[: self.batch_expire_after] if expired else reqs
        out: list[dict[str, Any]] = []
        for item in answered:
            body = item.get("request") or {}
            fault = self.fault_for(body) if self.fault_for else None
            status, obj, _ = self.response(batch["model"], body, fault)
            entry: dict[str, Any] = {"metadata": item.get("metadata") or {}}
            if status == 200:
                entry["response"] = obj
            else:
                entry["error"] = obj["error"]
            out.append(entry)
        batch["meta"]["state"] = "BATCH_STATE_EXPIRED" if expired else "BATCH_STATE_SUCCEEDED"
        batch["meta"]["output"] = {"inlinedResponses": {"inlinedResponses": out}}
