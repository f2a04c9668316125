"""A loopback fake of the OpenAI REST API for tests and benchmarks.

Serves (under /v1): chat/completions, images/generations, images/edits (multipart),
files (multipart upload, metadata, content) and batches (create, retrieve). Replies are
computed from the request: with a ``json_schema`` response format the default reply is a
JSON object satisfying that schema, built from the request text. Use with the real SDK:
``OpenAI(base_url=server.base_url, api_key="x")``.
"""

from __future__ import annotations

import base64
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
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
    parse_multipart,
    png_bytes,
)

__all__ = ["FakeOpenAI", "Fault", "request_text", "request_images"]

_ids = itertools.count(1)


def request_text(body: dict[str, Any]) -> str:
    """All text of a chat request's messages, in order."""
    parts: list[str] = []
    for msg in body.get("messages", []):
        content = msg.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(p.get("text", "") for p in content if p.get("type") == "text")
    return "\n".join(parts)


def last_user_text(body: dict[str, Any]) -> str:
    for msg in reversed(body.get("messages", [])):
        if msg.get("role") == "user":
            return request_text({"messages": [msg]})
    return ""


def request_images(body: dict[str, Any]) -> list[bytes]:
    """Decoded bytes of every data-URL image in a chat request."""
    out: list[bytes] = []
    for msg in body.get("messages", []):
        content = msg.get("content")
        if isinstance(content, list):
            for p in content:
                if p.get("type") == "image_url":
                    url = p["image_url"]["url"]
                    out.append(base64.b64decode(url.split(",", 1)[1]))
    return out


@dataclass
class _Batch:
    obj: dict[str, Any]
    lines: list[dict[str, Any]]
    polls: int = 0


class FakeOpenAI(FakeServer):
    """Scriptable fake; see FakeServer for faults / latency / rate limits.

    reply(body) -> str | dict: the assistant content for a chat request (default: schema echo).
    image_reply(prompt, input_image_or_None, body) -> PNG bytes for images endpoints.
    batch_polls_to_complete: retrieve() calls before a batch completes.
    batch_expire_after: if set, a batch expires having answered only its first N lines.
    revise_prompts: images replies carry ``revised_prompt`` (as DALL-E 3 returns).
    Images endpoints honour the same faults as chat (status, delay_s, drop, 401 echo) and
    the server rate limit.

    Like a real server, a reply longer than the request's ``max_tokens`` (estimated at four
    characters a token) is cut there with ``finish_reason: length``. Knobs to behave like a
    given real server (``FakeOpenAI.like_llamacpp()`` sets them as llama-cpp-python 0.3.36's
    server does, measured; tests/llm/fixtures/llamacpp_replies.json holds its real replies):
    json_schema: False answers a ``json_schema`` response format as a bad request;
    list_content: False answers user content given as a list of parts as a bad request;
    bad_request_status: the status of those bad requests (500 on llama.cpp, with a traceback
    in the message); retry_after: False sends 429s without Retry-After headers;
    serial: one generation at a time (requests queue, as on a one-slot local server; see
    FakeServer for what it counts); openapi_title: GET /openapi.json answers with this title
    (how llama-cpp-python's server can be recognised); slots: GET /props answers
    ``{"total_slots": slots}`` as llama.cpp's own server (llama-server) does; vision: /props
    also reports ``"modalities": {"vision": vision}`` as llama-server does (a text model:
    False), and with False image parts are answered as a text model's server does.
    """

    LLAMACPP_SCHEMA_ERROR = (
        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
        "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
        "'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n  File "
        '"/srv/venv/lib/python3.11/site-packages/llama_cpp/server/app.py", line 376, in '
        "create_chat_completion\n    POST /v1/chat/completions"
    )
    LLAMACPP_TITLE = "\U0001f999 llama.cpp Python API"  # its FastAPI app's title
    LLAMACPP_LIST_ERROR = 'can only concatenate str (not "list") to str'

    @classmethod
    def like_llamacpp(cls, **kw: Any) -> FakeOpenAI:
        """A fake that answers as llama-cpp-python 0.3.36's server: json_object (+ schema)
        only, string content only, 500 for bad requests, no rate-limit headers, serial."""
        base = dict(
            json_schema=False,
            list_content=False,
            bad_request_status=500,
            retry_after=False,
            serial=True,
            openapi_title=cls.LLAMACPP_TITLE,
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
        slots: int | None = None,
        openapi_title: str | None = None,
        vision: bool | None = None,
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
        self.slots = slots
        self.vision = vision
        self.openapi_title = openapi_title
        self.reply = reply
        self.image_reply = image_reply
        self.batch_polls_to_complete = batch_polls_to_complete
        self.batch_expire_after = batch_expire_after
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, _Batch] = {}
        self.revise_prompts = False  # images replies carry revised_prompt (like DALL-E 3)
        self.edit_files: list[dict[str, Any]] = []  # multipart files of each images/edits call
        self.json_schema = json_schema
        self.list_content = list_content

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    # -- routing -----------------------------------------------------------------------
    def route(self, h: BaseHTTPRequestHandler, method: str, path: str, body: bytes) -> None:
        if method == "GET" and path == "/props" and (self.slots or self.vision is not None):
            props: dict[str, Any] = {"total_slots": self.slots or 1, "model_path": "m.gguf"}
            if self.vision is not None:
                props["modalities"] = {"vision": self.vision, "audio": False}
            return self.send_json(h, 200, props)
        if method == "GET" and path == "/openapi.json" and self.openapi_title is not None:
            info = {"title": self.openapi_title, "version": "0.3.36"}
            return self.send_json(h, 200, {"openapi": "3.1.0", "info": info, "paths": {}})
        if method == "GET" and path == "/v1/models":
            return self._models(h)
        if method == "POST" and path == "/v1/chat/completions":
            return self._chat_http(h, json.loads(body))
        if method == "POST" and path == "/v1/images/generations":
            return self._images_generate(h, json.loads(body))
        if method == "POST" and path == "/v1/images/edits":
            return self._images_edit(h, parse_multipart(h.headers["Content-Type"], body))
        if method == "POST" and path == "/v1/files":
            return self._file_upload(h, parse_multipart(h.headers["Content-Type"], body))
        if method == "GET" and path.startswith("/v1/files/"):
            return self._file_get(h, path.removeprefix("/v1/files/"))
        if method == "POST" and path == "/v1/batches":
            return self._batch_create(h, json.loads(body))
        if method == "GET" and path.startswith("/v1/batches/"):
            return self._batch_get(h, path.removeprefix("/v1/batches/"))
        self.send_json(h, 404, {"error": {"message": f"no route {method} {path}"}})

    def _models(self, h: BaseHTTPRequestHandler) -> None:
        """The model list; on a serial fake it waits for the generation slot first, as
        llama-cpp-python's /v1/models takes the model lock."""
        if self.serial:
            with self._slot:
                pass
        model = self.requests[-1].get("model", "model") if self.requests else "model"
        data: list[dict[str, Any]] = [
            {"id": model, "object": "model", "owned_by": "me", "permissions": []}
        ]
        self.send_json(h, 200, {"object": "list", "data": data})

    # -- chat --------------------------------------------------------------------------
    def default_reply(self, body: dict[str, Any]) -> str | dict[str, Any]:
        fmt = body.get("response_format") or {}
        text = last_user_text(body)
        if fmt.get("type") == "json_schema":
            return instance_for_schema(fmt["json_schema"]["schema"], text)
        if fmt.get("type") == "json_object" and isinstance(fmt.get("schema"), dict):
            return instance_for_schema(fmt["schema"], text)  # llama.cpp's grammar
        if fmt.get("type") == "json_object":
            return {"echo": text[:80]}
        n_img = len(request_images(body))
        return f"echo: {text[:200]}" + (f" [{n_img} images]" if n_img else "")

    def bad_request(self, body: dict[str, Any]) -> str | None:
        """Why this server would reject the request's form (see the knobs), or None."""
        fmt = body.get("response_format") or {}
        if not self.json_schema and fmt.get("type") not in (None, "text", "json_object"):
            return self.LLAMACPP_SCHEMA_ERROR
        lists = any(isinstance(m.get("content"), list) for m in body.get("messages", []))
        if not self.list_content and lists:
            return self.LLAMACPP_LIST_ERROR
        if self.vision is False and request_images(body):
            return "image input is not supported by this model"
        return None

    def completion(
        self, body: dict[str, Any], fault: Fault | None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        """Status, JSON body and headers for one chat request (shared with batches)."""
        headers = dict(fault.headers) if fault else {}
        if fault and fault.retry_after_s is not None:
            headers.update(self.retry_headers(fault.retry_after_s))
        bad = self.bad_request(body)
        if bad is not None and not (fault and fault.status):
            status = self.bad_request_status
            kind = "internal_server_error" if status >= 500 else "invalid_request_error"
            return status, {"error": {"message": bad, "type": kind, "code": None}}, headers
        if fault and fault.status:
            err = {
                "message": fault.message or f"injected error {fault.status}",
                "type": "invalid_request_error" if fault.status < 500 else "server_error",
                "code": fault.code,
            }
            return fault.status, {"error": err}, headers
        refusal = fault.refusal if fault else None
        if refusal is not None:
            content: str | None = None
        elif fault and fault.content is not None:
            content = fault.content
        else:
            made = (self.reply or self.default_reply)(body)
            content = made if isinstance(made, str) else json.dumps(made)
        prompt_tokens = estimate_tokens(request_text(body)) + 85 * len(request_images(body))
        finish = "stop"
        limit = body.get("max_tokens")
        if content and limit and estimate_tokens(content) > int(limit):
            content, finish = content[: 4 * int(limit)], "length"
        completion_tokens = estimate_tokens(content or refusal or "")
        obj = {
            "id": f"chatcmpl-{next(_ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": refusal},
                    "finish_reason": finish,
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        return 200, obj, headers

    def _chat_http(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        self.record(h, body)
        wait = self.throttle_wait()
        if wait > 0:
            err = {"message": "rate limit exceeded", "type": "requests", "code": "rate_limit"}
            return self.send_json(h, 429, {"error": err}, self.retry_headers(wait))
        reply = self.serially(h, lambda: self._generate(h, body))
        if reply is not None:
            self.send_json(h, *reply)

    def _generate(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> Reply | None:
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
        auth = h.headers.get("Authorization", "")
        if fault and fault.status == 401 and fault.message is None:
            # Like real providers, echo the key it got: clients must redact it.
            fault = Fault(status=401, message=f"Incorrect API key provided: {auth[7:]}")
        return self.completion(body, fault)

    # -- images ------------------------------------------------------------------------
    def _image_reply(self, prompt: str, image: bytes | None, body: dict[str, Any]) -> bytes:
        if self.image_reply is not None:
            return self.image_reply(prompt, image, body)
        if image is not None:
            return edited_png(image, prompt)
        w, h = (int(x) for x in str(body.get("size") or "64x64").split("x"))
        return png_bytes(prompt, (w, h))

    def _image_prelude(
        self, h: BaseHTTPRequestHandler, body: dict[str, Any]
    ) -> tuple[bool, Fault | None]:
        """Rate limit, timeouts, drops and latency for images requests, like chat.

        Returns (answered, fault): answered when the request got its reply already (429 from
        the rate limit, or a dropped connection); fault is what to reply with otherwise.
        """
        wait = self.throttle_wait()
        if wait > 0:
            err = {"message": "rate limit exceeded", "type": "requests", "code": "rate_limit"}
            self.send_json(h, 429, {"error": err}, self.retry_headers(wait))
            return True, None
        fault = self.next_fault(body)
        if fault and fault.delay_s:
            time.sleep(fault.delay_s)
        if fault and fault.drop:
            self.drop(h)
            return True, None
        self.work(self.latency_s)
        if fault and fault.status == 401 and fault.message is None:
            auth = h.headers.get("Authorization", "")
            fault = Fault(status=401, message=f"Incorrect API key provided: {auth[7:]}")
        return False, fault

    def _image_data(self, png: bytes, prompt: str) -> dict[str, Any]:
        item: dict[str, Any] = {"b64_json": b64(png)}
        if self.revise_prompts:
            item["revised_prompt"] = f"revised: {prompt}"
        return item

    def _images_generate(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        self.record(h, body)
        answered, fault = self._image_prelude(h, body)
        if answered:
            return None
        if fault and fault.status:
            status, obj, headers = self.completion(body, fault)
            return self.send_json(h, status, obj, headers)
        n = int(body.get("n") or 1)
        prompt = body["prompt"]
        data = [self._image_data(self._image_reply(prompt, None, body), prompt) for _ in range(n)]
        self.send_json(h, 200, {"created": int(time.time()), "data": data})

    def _images_edit(self, h: BaseHTTPRequestHandler, form: dict[str, list[Any]]) -> None:
        prompt = str(form.get("prompt", [""])[0])
        images = form.get("image") or form.get("image[]") or []
        masks = form.get("mask") or []
        body = {k: v[0] for k, v in form.items() if isinstance(v[0], str)}
        self.record(h, {**body, "n_images": len(images), "n_masks": len(masks)})
        self.edit_files.append({"image": images, "mask": masks})
        answered, fault = self._image_prelude(h, body)
        if answered:
            return None
        if fault and fault.status:
            status, obj, headers = self.completion(body, fault)
            return self.send_json(h, status, obj, headers)
        first = images[0][1] if images else None
        out = self._image_reply(prompt, first, body)
        data = [self._image_data(out, prompt)]
        self.send_json(h, 200, {"created": int(time.time()), "data": data})

    # -- files -------------------------------------------------------------------------
    def _file_upload(self, h: BaseHTTPRequestHandler, form: dict[str, list[Any]]) -> None:
        filename, data = form["file"][0]
        fid = f"file-{next(_ids)}"
        meta = {
            "id": fid,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": form.get("purpose", ["batch"])[0],
            "status": "processed",
        }
        with self.lock:
            self.files[fid] = {"meta": meta, "data": data}
        self.send_json(h, 200, meta)

    def _file_get(self, h: BaseHTTPRequestHandler, rest: str) -> None:
        fid, _, tail = rest.partition("/")
        entry = self.files.get(fid)
        if entry is None:
            return self.send_json(h, 404, {"error": {"message": f"no file {fid}"}})
        if tail == "content":
            return self.send_bytes(h, 200, entry["data"], "application/octet-stream")
        self.send_json(h, 200, entry["meta"])

    # -- batches -----------------------------------------------------------------------
    def _batch_create(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        entry = self.files.get(body.get("input_file_id", ""))
        if entry is None:
            return self.send_json(h, 400, {"error": {"message": "unknown input_file_id"}})
        lines = [json.loads(x) for x in entry["data"].decode("utf-8").splitlines() if x.strip()]
        bid = f"batch_{next(_ids)}"
        obj = {
            "id": bid,
            "object": "batch",
            "endpoint": body.get("endpoint"),
            "input_file_id": body["input_file_id"],
            "completion_window": body.get("completion_window", "24h"),
            "status": "validating",
            "created_at": int(time.time()),
            "output_file_id": None,
            "error_file_id": None,
            "errors": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
        }
        with self.lock:
            self.batches[bid] = _Batch(obj=obj, lines=lines)
        self.send_json(h, 200, obj)

    def _batch_get(self, h: BaseHTTPRequestHandler, bid: str) -> None:
        batch = self.batches.get(bid)
        if batch is None:
            return self.send_json(h, 404, {"error": {"message": f"no batch {bid}"}})
        with self.lock:
            batch.polls += 1
            ready = batch.polls >= self.batch_polls_to_complete
            if batch.obj["status"] in ("validating", "in_progress") and not ready:
                batch.obj["status"] = "in_progress"
            elif batch.obj["status"] in ("validating", "in_progress"):
                self._finish_batch(batch)
        self.send_json(h, 200, batch.obj)

    def _finish_batch(self, batch: _Batch) -> None:
        lines = batch.lines
        expired = self.batch_expire_after is not None and self.batch_expire_after < len(lines)
        if expired:
            lines = lines[: self.batch_expire_after]
        out: list[str] = []
        failed = 0
        for line in lines:
            fault = self.fault_for(line["body"]) if self.fault_for else None
            status, obj, _ = self.completion(line["body"], fault)
            failed += status != 200
            out.append(
                json.dumps(
                    {
                        "id": f"batch_req_{next(_ids)}",
                        "custom_id": line["custom_id"],
                        "response": {"status_code": status, "request_id": "r", "body": obj},
                        "error": None,
                    }
                )
            )
        fid = f"file-{next(_ids)}"
        data = ("\n".join(out) + "\n").encode("utf-8")
        self.files[fid] = {"meta": {"id": fid, "object": "file", "bytes": len(data)}, "data": data}
        batch.obj.update(
            status="expired" if expired else "completed",
            output_file_id=fid,
            request_counts={"total": len(batch.lines), "completed": len(lines), "failed": failed},
        )
