"""OpenAI-compatible chat backend (OpenAI, vLLM, SGLang, Ollama, ... via base_url)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import time
from typing import Any

import openai

from forenset.backends import apiloop
from forenset.backends.llm.base import RawReply, Turns, image_mime
from forenset.backends.llm.jsonout import json_schema_for
from forenset.backends.llm.secrets import api_key
from forenset.backends.llm.types import OUTPUT_MODES, ChatRequest, LLMCallError, ModelSpec
from forenset.backends.retry import error_from_status, openai_errors

__all__ = ["OpenAIChat", "build_body", "error_from_status", "reply_from_completion"]

log = logging.getLogger("forenset.llm")
# a rejection about the response format (not about, say, the images): step the mode down
_ABOUT_FORMAT = re.compile(r"response_format|json_schema|json_object|schema", re.IGNORECASE)


def schema_instruction(req: ChatRequest) -> str:
    """What the prompt says about the reply's form when the server does not enforce the schema
    (every mode but json_schema): the schema itself, and JSON only."""
    assert req.response_model is not None
    schema = json.dumps(json_schema_for(req.response_model), separators=(",", ":"))
    return (
        "Reply with only one JSON object, no other text, that matches this JSON schema:\n" + schema
    )


def build_body(
    spec: ModelSpec, req: ChatRequest, extra: Turns, mode: str = "json_schema"
) -> dict[str, Any]:
    """The chat/completions JSON body (also one line of a Batch API input file).

    Text-only user content is a plain string (text chat templates, e.g. llama.cpp's, reject a
    list of parts); with images it is a list of parts. ``mode`` (OUTPUT_MODES) says how
    structured output is asked for."""
    content: str | list[dict[str, Any]] = req.user
    if req.images:
        content = [{"type": "text", "text": req.user}]
        for img in req.images:
            url = f"data:{image_mime(img)};base64,{base64.b64encode(img).decode('ascii')}"
            content.append({"type": "image_url", "image_url": {"url": url}})
    system = req.system
    if req.response_model is not None and mode != "json_schema":
        system = f"{system}\n\n{schema_instruction(req)}" if system else schema_instruction(req)
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
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
    if req.response_model is not None and mode == "json_schema":
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": req.response_model.__name__[:64],
                "schema": json_schema_for(req.response_model),
                "strict": False,
            },
        }
    elif req.response_model is not None and mode == "json_object_schema":
        schema = json_schema_for(req.response_model)
        body["response_format"] = {"type": "json_object", "schema": schema}
    elif req.response_model is not None and mode == "json_object":
        body["response_format"] = {"type": "json_object"}
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
        finish_reason=choice.finish_reason,
    )


# a generation that outlived one timeout may need a few more: what we would send meanwhile
# only queues behind it, so wait that long for it (a hung server then fails the retries)
IDLE_WAIT = 4
LLAMACPP_PYTHON_TITLE = "llama.cpp Python API"  # llama-cpp-python's FastAPI app title


async def server_slots(
    spec: ModelSpec, timeout_s: float = 5.0, vision: dict[str, bool] | None = None
) -> tuple[int | None, bool]:
    """How many requests a self-hosted server generates at once, when it says so: llama.cpp's
    own server reports ``total_slots`` at GET /props; llama-cpp-python's server (its OpenAPI
    title) serves one request at a time. None when the server says neither (vLLM, SGLang,
    Ollama, a provider) or cannot be asked: the configured concurrency then stands. The flag
    says the server finishes a generation its client gave up on (llama-cpp-python does, for
    non-streamed requests; measured: tests/realmodels).

    Why: a serial server queues what it cannot generate yet, so a client that sends more
    than its slots only makes the queued requests wait out their timeouts and be abandoned.
    Neither endpoint takes the server's generation slot, so the probe never waits on it.

    llama.cpp's /props also says whether the loaded model takes images (``modalities``:
    ``{"vision": false}`` for a text model); that goes into ``vision[base_url]``."""
    if not spec.base_url:
        return None, False
    import httpx

    root = spec.base_url.rstrip("/").removesuffix("/v1")
    key = api_key(spec.api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(timeout=timeout_s, headers=headers) as client:
        for path in ("/props", "/openapi.json"):
            try:
                resp = await client.get(f"{root}{path}")
                obj = resp.json() if resp.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                continue
            if not isinstance(obj, dict):
                continue
            slots = obj.get("total_slots")
            modalities = obj.get("modalities")
            if path == "/props" and isinstance(modalities, dict) and vision is not None:
                if isinstance(modalities.get("vision"), bool):
                    vision[spec.base_url] = modalities["vision"]
            if path == "/props" and isinstance(slots, int) and slots >= 1:
                return slots, False
            title = str((obj.get("info") or {}).get("title", ""))
            if path == "/openapi.json" and LLAMACPP_PYTHON_TITLE in title:
                return 1, True
    return None, False


class OpenAIChat:
    """Chat completions through the process's shared AsyncOpenAI clients (SDK retries off).

    The structured-output mode is negotiated per (base_url, model) and process: a spec's
    ``structured_output`` when set, else json_schema first, stepping down OUTPUT_MODES each
    time the server rejects the format (HTTP 4xx, or a 500 that is a request validation
    error). Until a model's mode is known its requests go one at a time, so a server that
    rejects json_schema sees one rejected request, not one per concurrent item."""

    name = "openai"

    def __init__(self) -> None:
        self.modes: dict[tuple[str, str], str] = {}  # (base_url, model) -> confirmed mode
        self.locks: dict[tuple[str, str], asyncio.Lock] = {}
        # base_urls of servers that finish a generation whose client left (llama-cpp-python)
        self.finishes_abandoned: set[str] = set()
        # base_url -> whether its model takes images, where the server says (llama.cpp /props)
        self.vision: dict[str, bool] = {}

    def client(self, spec: ModelSpec) -> openai.AsyncOpenAI:
        return apiloop.openai_client(spec)

    async def slots(self, spec: ModelSpec) -> int | None:
        """The server's generation slots when it reports them (``server_slots``)."""
        slots, finishes = await server_slots(spec, vision=self.vision)
        if finishes and spec.base_url:
            self.finishes_abandoned.add(spec.base_url)
        else:  # a port reused by another server
            self.finishes_abandoned.discard(spec.base_url or "")
        return slots

    async def wait_idle(self, spec: ModelSpec) -> None:
        """Wait (at most ``IDLE_WAIT`` x ``timeout_s``) until a serial llama-cpp-python server has finished
        the generation our timed-out request left behind: its GET /v1/models takes the same
        model lock as a generation, so it answers once the server is idle. Called while the
        timed-out request still holds its limiter slot, so no request of ours queues behind
        abandoned work (its timeout would then count that work too)."""
        import httpx

        assert spec.base_url is not None
        t0 = time.monotonic()
        try:
            async with httpx.AsyncClient(timeout=IDLE_WAIT * spec.timeout_s) as client:
                await client.get(f"{spec.base_url.rstrip('/')}/models")
        except httpx.HTTPError as exc:
            log.warning("%s: server still busy after a timeout (%s)", spec.label, exc)
            return
        log.info("%s: waited %.1fs for an abandoned generation", spec.label, time.monotonic() - t0)

    async def send(self, spec: ModelSpec, req: ChatRequest, extra: Turns, mode: str) -> RawReply:
        body = build_body(spec, req, extra, mode)
        params = {k: body.pop(k) for k in list(spec.params)}
        client = self.client(spec)
        try:
            with openai_errors(spec.timeout_s):
                raw = await client.chat.completions.with_raw_response.create(
                    **body, extra_body=params or None
                )
                obj = raw.parse()
        except LLMCallError as exc:
            if exc.reason.startswith("timeout") and spec.base_url in self.finishes_abandoned:
                await self.wait_idle(spec)
            raise
        reply = reply_from_completion(obj, dict(raw.headers))
        reply.output_mode = mode if req.response_model is not None else None
        return reply

    async def complete(self, spec: ModelSpec, req: ChatRequest, extra: Turns) -> RawReply:
        if req.response_model is None:
            return await self.send(spec, req, extra, "json_schema")
        if spec.structured_output != "auto":
            return await self.send(spec, req, extra, spec.structured_output)
        key = (spec.base_url or "", spec.model)
        if key in self.modes:
            return await self.send(spec, req, extra, self.modes[key])
        lock = self.locks.setdefault(key, asyncio.Lock())
        async with lock:
            i = 0
            while True:
                mode = self.modes.get(key, OUTPUT_MODES[i])
                try:
                    reply = await self.send(spec, req, extra, mode)
                except LLMCallError as exc:
                    if (
                        key in self.modes
                        or not (exc.rejected and _ABOUT_FORMAT.search(exc.reason))
                        or i + 1 >= len(OUTPUT_MODES)
                    ):
                        raise
                    log.info(
                        "%s rejected %s output (%s); trying %s",
                        spec.label,
                        mode,
                        exc.reason,
                        OUTPUT_MODES[i + 1],
                    )
                    i += 1
                    continue
                self.modes[key] = mode
                return reply
