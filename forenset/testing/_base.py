"""Shared machinery for the loopback fake API servers (stdlib only, started on port 0)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, dict[str, Any], dict[str, str]]  # status, JSON body, headers


@dataclass
class Fault:
    """One injected fault for one generation request; fields left as None do nothing.

    status: reply with this HTTP error status (e.g. 429, 500, 401, 400).
    retry_after_s: add Retry-After (and retry-after-ms) headers.
    code: error code string in the JSON error body (e.g. "content_policy_violation").
    delay_s: sleep before replying (drives client timeouts).
    content: replace the model's text with this (malformed JSON, code fences, ...).
    refusal: reply with a refusal (OpenAI ``message.refusal``; Gemini finishReason SAFETY).
    drop: close the connection without replying (connection error on the client).
    raw_body: reply 200 with these bytes as the body (a broken server / proxy).
    headers: extra response headers (e.g. x-ratelimit-*).
    """

    status: int | None = None
    retry_after_s: float | None = None
    code: str | None = None
    message: str | None = None
    delay_s: float = 0.0
    content: str | None = None
    refusal: str | None = None
    drop: bool = False
    raw_body: bytes | None = None  # send these bytes as a 200 application/json reply
    headers: dict[str, str] = field(default_factory=dict)


class RateWindow:
    """Server-side token bucket: ``rps`` requests per second with one second of burst."""

    def __init__(self, rps: float) -> None:
        self.rps = rps
        self.level = rps
        self.t = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> float:
        """Return 0.0 when admitted, else the seconds until a request would be admitted."""
        with self.lock:
            now = time.monotonic()
            self.level = min(self.rps, self.level + (now - self.t) * self.rps)
            self.t = now
            if self.level >= 1.0:
                self.level -= 1.0
                return 0.0
            return (1.0 - self.level) / self.rps


class SlidingWindow:
    """Strict server-side limit: at most ``rps`` requests in any one-second window.

    Unlike RateWindow it keeps no burst credit: a client must spread its requests evenly,
    and the Retry-After it gets is the exact time until the oldest request leaves the window.
    """

    def __init__(self, rps: float, window_s: float = 1.0) -> None:
        self.rps = rps
        self.window_s = window_s
        self.limit = int(rps * window_s)
        self.sent: deque[float] = deque()
        self.lock = threading.Lock()

    def _expire(self, now: float) -> None:
        while self.sent and now - self.sent[0] >= self.window_s:
            self.sent.popleft()

    def take(self) -> float:
        """Return 0.0 when admitted, else the seconds until a request would be admitted."""
        with self.lock:
            now = time.monotonic()
            self._expire(now)
            if len(self.sent) < self.limit:
                self.sent.append(now)
                return 0.0
            return max(1e-3, self.sent[0] + self.window_s - now)

    def remaining(self) -> int:
        with self.lock:
            self._expire(time.monotonic())
            return max(0, self.limit - len(self.sent))

    def reset_s(self) -> float:
        """Seconds until the oldest request in the window leaves it (0 when empty)."""
        with self.lock:
            now = time.monotonic()
            self._expire(now)
            return max(0.0, self.sent[0] + self.window_s - now) if self.sent else 0.0


def instance_for_schema(
    schema: dict[str, Any], text: str, root: dict[str, Any] | None = None
) -> Any:
    """Build a value that satisfies a JSON schema, derived from the request ``text``.

    Strings echo words of the request, numbers come from its length clamped into bounds,
    so replies differ per request and tests can check content reached the server.
    """
    root = root if root is not None else schema
    if "$ref" in schema:
        name = schema["$ref"].split("/")[-1]
        defs = root.get("$defs") or root.get("definitions") or {}
        return instance_for_schema(defs[name], text, root)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return instance_for_schema(options[0], text, root)
    if "allOf" in schema:
        return instance_for_schema(schema["allOf"][0], text, root)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        values = schema["enum"]
        return values[len(text) % len(values)]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    kind = str(kind).lower()
    if kind == "object":
        props = schema.get("properties", {})
        return {k: instance_for_schema(v, f"{k} {text}", root) for k, v in props.items()}
    if kind == "array":
        n = max(int(schema.get("minItems", 1)), 1)
        n = min(n, int(schema.get("maxItems", n)))
        item = schema.get("items", {"type": "string"})
        return [instance_for_schema(item, f"{i} {text}", root) for i in range(n)]
    if kind in ("integer", "number"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        hi = schema.get("maximum", schema.get("exclusiveMaximum", lo + 100))
        if "exclusiveMinimum" in schema:
            lo = lo + 1
        if "exclusiveMaximum" in schema:
            hi = hi - 1
        value = lo + (len(text) % (int(hi - lo) + 1)) if hi >= lo else lo
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return len(text) % 2 == 0
    if kind == "null":
        return None
    words = " ".join(text.split()[:8]) or "empty"
    out = f"echo: {words}"
    if "maxLength" in schema:
        out = out[: int(schema["maxLength"])]
    return out.ljust(int(schema.get("minLength", 0)), ".")


def estimate_tokens(text: str) -> int:
    """The fakes' token count: about four characters per token, at least one."""
    return max(1, math.ceil(len(text) / 4))


def png_bytes(seed_text: str, size: tuple[int, int] = (64, 64)) -> bytes:
    """A small PNG whose colour is derived from ``seed_text`` (a computed, not canned, image)."""
    from PIL import Image

    digest = hashlib.sha256(seed_text.encode("utf-8")).digest()
    img = Image.new("RGB", size, (digest[0], digest[1], digest[2]))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def edited_png(image_bytes: bytes, seed_text: str) -> bytes:
    """Default image-edit reply: the input with a prompt-coloured box in its centre."""
    from PIL import Image, ImageDraw

    img = Image.open(io.BytesIO(image_bytes)).convert("RGB")
    digest = hashlib.sha256(seed_text.encode("utf-8")).digest()
    w, h = img.size
    ImageDraw.Draw(img).rectangle(
        [w // 4, h // 4, 3 * w // 4, 3 * h // 4], fill=(digest[0], digest[1], digest[2])
    )
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def parse_multipart(content_type: str, body: bytes) -> dict[str, list[Any]]:
    """Parse multipart/form-data into {name: [str | (filename, bytes), ...]}."""
    msg = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
    )
    fields: dict[str, list[Any]] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_filename()
        raw = part.get_payload(decode=True)  # bytes for a leaf part
        payload = raw if isinstance(raw, bytes) else b""
        value: Any = (filename, payload) if filename else payload.decode("utf-8")
        fields.setdefault(str(name), []).append(value)
    return fields


class FakeServer:
    """Base class: a ThreadingHTTPServer on 127.0.0.1:0 in a daemon thread.

    Subclasses implement ``route(handler, method, path, body)``. Scripting:
    ``faults`` is a queue consumed one per generation request; ``fault_for(request)`` may
    return a Fault chosen from the request itself (checked first); ``latency_s`` delays
    every generation reply; ``rate_limit_rps`` makes the server answer 429 + Retry-After
    beyond that rate; ``ratelimit_headers`` adds x-ratelimit-* headers to every reply.
    ``strict_window`` counts the rate over a sliding one-second window with no burst credit
    (SlidingWindow) instead of a bucket with one second of burst; ``rate_limited`` counts the
    429s the rate limit gave (injected 429 faults are not counted).

    Real-server knobs shared by both fakes: ``retry_after=False`` sends 429s without
    Retry-After (nor Gemini's RetryInfo); ``bad_request_status`` is the status of a request
    the server rejects for its form (500 on llama.cpp); ``serial=True`` generates one request
    at a time, as a one-slot local server does (llama-cpp-python 0.3.36, measured): the
    others queue (``queued`` counts those that had to wait, ``peak_queue`` the most at once),
    a queued request whose client left is not generated (``skipped``), and a generation whose
    client left before its reply is still finished (``abandoned``).
    """

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        rate_limit_rps: float | None = None,
        ratelimit_headers: bool = False,
        strict_window: bool = False,
        retry_after: bool = True,
        bad_request_status: int = 400,
        serial: bool = False,
    ) -> None:
        self.latency_s = latency_s
        self.retry_after = retry_after
        self.bad_request_status = bad_request_status
        self.serial = serial
        self._slot = threading.Lock()  # the one generation slot of a serial server
        self.queued = 0
        self.peak_queue = 0
        self.skipped = 0
        self.abandoned = 0
        self.rate: RateWindow | SlidingWindow | None = None
        if rate_limit_rps:
            window = SlidingWindow if strict_window else RateWindow
            self.rate = window(rate_limit_rps)
        self.rate_limited = 0
        self.ratelimit_headers = ratelimit_headers
        self.faults: deque[Fault] = deque()
        self.fault_for: Callable[[dict[str, Any]], Fault | None] | None = None
        self.requests: list[dict[str, Any]] = []  # parsed generation request bodies
        self.request_headers: list[dict[str, str]] = []
        self.counts: dict[str, int] = {}
        self.in_flight = 0
        self._waiting = 0
        self.peak_in_flight = 0  # most generation requests in work at once
        self.lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> FakeServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                return

            def _body(self) -> bytes:
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def do_POST(self) -> None:  # noqa: N802
                server._dispatch(self, "POST", self._body())

            def do_GET(self) -> None:  # noqa: N802
                server._dispatch(self, "GET", b"")

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 1024
            allow_reuse_address = True

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *faults: Fault) -> None:
        """Queue faults, consumed in order by the next generation requests."""
        with self.lock:
            self.faults.extend(faults)

    # -- helpers for subclasses --------------------------------------------------------
    def _dispatch(self, h: BaseHTTPRequestHandler, method: str, body: bytes) -> None:
        path = h.path.split("?", 1)[0]
        with self.lock:
            self.counts[path] = self.counts.get(path, 0) + 1
        try:
            self.route(h, method, path, body)
        except BrokenPipeError:
            return
        except Exception as exc:  # report server bugs to the client as 500s
            self.send_json(h, 500, {"error": {"message": f"fake server error: {exc!r}"}})

    def route(self, h: BaseHTTPRequestHandler, method: str, path: str, body: bytes) -> None:
        """Each fake (OpenAI, Gemini) answers its own routes; the base answers none."""
        self.send_json(h, 404, {"error": {"message": f"no route {method} {path}"}})

    def next_fault(self, request: dict[str, Any]) -> Fault | None:
        if self.fault_for is not None:
            fault = self.fault_for(request)
            if fault is not None:
                return fault
        with self.lock:
            return self.faults.popleft() if self.faults else None

    def record(self, h: BaseHTTPRequestHandler, request: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(request)
            self.request_headers.append({k.lower(): v for k, v in h.headers.items()})

    def work(self, seconds: float) -> None:
        """Simulated model latency; counts requests in progress (before any reply is sent)."""
        with self.lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            time.sleep(seconds)
        finally:
            with self.lock:
                self.in_flight -= 1

    def serially(
        self, h: BaseHTTPRequestHandler, produce: Callable[[], Reply | None]
    ) -> Reply | None:
        """Run one generation (``produce``) in the server's one slot when ``serial``; the
        reply is sent after the slot is free, so a client's next request never queues behind
        the reply to its last one. None: nothing to send (skipped, or already answered)."""
        if not self.serial:
            return produce()
        if not self._slot.acquire(blocking=False):
            with self.lock:
                self.queued += 1
                self._waiting += 1
                self.peak_queue = max(self.peak_queue, self._waiting)
            self._slot.acquire()
            with self.lock:
                self._waiting -= 1
        try:
            if client_gone(h):  # llama-cpp-python checks before it generates
                with self.lock:
                    self.skipped += 1
                return None
            reply = produce()
            if client_gone(h):  # generated for nobody
                with self.lock:
                    self.abandoned += 1
            return reply
        finally:
            self._slot.release()

    def throttle_wait(self) -> float:
        """0.0 when the rate limit admits this request, else seconds to wait."""
        wait = self.rate.take() if self.rate else 0.0
        if wait > 0:
            with self.lock:
                self.rate_limited += 1
        return wait

    def limit_headers(self) -> dict[str, str]:
        if not (self.ratelimit_headers and self.rate):
            return {}
        rpm = int(self.rate.rps * 60)
        reset = "1s"
        if isinstance(self.rate, SlidingWindow):  # what is left of the current second
            remaining = self.rate.remaining()
            reset = f"{int(self.rate.reset_s() * 1000)}ms"
        else:
            remaining = max(0, int(self.rate.level * 60))
        return {
            "x-ratelimit-limit-requests": str(rpm),
            "x-ratelimit-remaining-requests": str(remaining),
            "x-ratelimit-reset-requests": reset,
            "x-ratelimit-limit-tokens": str(rpm * 1000),
            "x-ratelimit-remaining-tokens": str(rpm * 1000),
            "x-ratelimit-reset-tokens": "1s",
        }

    def retry_headers(self, seconds: float) -> dict[str, str]:
        if not self.retry_after:
            return {}
        return {
            "retry-after": str(max(1, math.ceil(seconds))) if seconds >= 1 else f"{seconds:.3f}",
            "retry-after-ms": str(max(1, int(seconds * 1000))),
        }

    def send_json(
        self,
        h: BaseHTTPRequestHandler,
        status: int,
        obj: Any,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_bytes(h, status, json.dumps(obj).encode("utf-8"), "application/json", headers)

    def send_bytes(
        self,
        h: BaseHTTPRequestHandler,
        status: int,
        data: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(data)))
        for k, v in {**self.limit_headers(), **(headers or {})}.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    @staticmethod
    def drop(h: BaseHTTPRequestHandler) -> None:
        h.close_connection = True
        try:
            h.connection.shutdown(2)
        except OSError:
            pass


def client_gone(h: BaseHTTPRequestHandler) -> bool:
    """True when the client closed its connection while its request was queued or generating
    (it gave up)."""
    import select
    import socket

    try:
        ready, _, _ = select.select([h.connection], [], [], 0)
        return bool(ready) and h.connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
