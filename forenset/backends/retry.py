"""One attempt at a model API call, and when to try again: shared by chat and image clients.

Why one module: the chat engine and the image-API backends call the same providers under the
same account limits, so they must read failures the same way (429 + Retry-After throttles,
408/409/5xx, timeouts and dropped connections retry; refusals and other 4xx are final), feed
the same limiter, and back off by the same rule. Each caller keeps only what is its own (the
chat engine's budget, error window and repair turn; the image clients' result rows).

Every attempt is made and counted by us (SDK retries are off). The SDKs are imported inside the
functions that map their exceptions, so importing this module stays cheap.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from forenset.backends.llm.limits import ModelLimiter, retry_after_from
from forenset.backends.llm.secrets import redact
from forenset.backends.llm.types import LLMCallError

_POLICY_CODES = {"content_policy_violation", "content_filter", "moderation_blocked"}


class HasHeaders(Protocol):
    """A successful reply: its response headers teach the limiter the provider's limits."""

    @property
    def headers(self) -> Mapping[str, str]: ...


R = TypeVar("R", bound=HasHeaders)


@dataclass(frozen=True)
class RetryPolicy:
    """How many retries one item gets and how long it waits before each."""

    max_retries: int
    backoff_base_s: float
    backoff_max_s: float

    def delay(self, retry: int, failure: LLMCallError, rng: random.Random) -> float:
        """Retry-After when the server sent one (+10 % jitter), else capped exponential."""
        if failure.retry_after_s is not None:
            return failure.retry_after_s * (1.0 + 0.1 * rng.random())
        cap = min(self.backoff_max_s, self.backoff_base_s * 2 ** (retry - 1))
        return cap * (0.5 + 0.5 * rng.random())

    async def wait_to_retry(self, failure: LLMCallError, retries: int, rng: random.Random) -> bool:
        """Sleep before retry ``retries + 1`` and return True, or False when ``failure`` is final."""
        if not failure.retryable or retries >= self.max_retries:
            return False
        await asyncio.sleep(self.delay(retries + 1, failure, rng))
        return True


@dataclass
class Attempt(Generic[R]):
    """What one attempt gave: a reply, or the failure; ``skipped`` when it was never sent."""

    reply: R | None = None
    failure: LLMCallError | None = None
    skipped: bool = False


async def attempt(
    send: Callable[[], Awaitable[R]],
    limiter: ModelLimiter | None,
    *,
    est_tokens: int = 0,
    used_tokens: Callable[[R], int | None] = lambda _reply: None,
    garbled: tuple[type[BaseException], ...] = (json.JSONDecodeError,),
    garbled_reason: str = "malformed response body",
    still_wanted: Callable[[], bool] | None = None,
    log: logging.Logger | None = None,
    label: str = "",
    started: asyncio.Event | None = None,
    urgent: bool = False,
) -> Attempt[R]:
    """Take a limiter slot, make one call, classify what went wrong, and teach the limiter.

    ``send`` raises LLMCallError for failures it understands; ``garbled`` exceptions (a body
    that does not parse) are retryable; anything else is a terminal "unexpected" error of
    this item, never a crash. ``still_wanted`` is asked once a slot is free: False gives the
    slot back unused (the caller gave up while queueing). ``started`` is set when the call
    goes out (after the limiter's wait). ``urgent``: an item already under way (a retry, a
    repair, a hedge) takes the next slot before fresh items. Never raises but CancelledError.
    """
    if limiter is not None:
        await limiter.acquire(est_tokens, urgent)
        if still_wanted is not None and not still_wanted():
            await limiter.release(est_tokens=est_tokens, used_tokens=0)
            return Attempt(skipped=True)
    reply: R | None = None
    failure: LLMCallError | None = None
    t0 = time.monotonic()
    if started is not None:
        started.set()
    try:
        reply = await send()
    except LLMCallError as exc:
        failure = exc
    except garbled as exc:  # a garbled body (proxy hiccup, truncated image): retry
        failure = LLMCallError(f"{garbled_reason}: {exc}", retryable=True)
    except Exception as exc:  # an SDK surprise is one item's error, not a crash
        reason = f"unexpected {type(exc).__name__}: {redact(str(exc))[:300]}"
        if log is not None:
            log.warning("%s: %s", label, reason)
        failure = LLMCallError(reason, retryable=False)
    finally:
        if limiter is not None:
            used = used_tokens(reply) if reply is not None else None
            await limiter.release(est_tokens=est_tokens, used_tokens=used)
    if limiter is not None:
        if failure is not None:
            limiter.update_from_headers(failure.headers)
            if failure.throttled:
                limiter.on_throttle(failure.retry_after_s, failure.headers)
            else:
                limiter.record("error")
        else:
            assert reply is not None
            limiter.update_from_headers(reply.headers)
            limiter.record("ok", time.monotonic() - t0, started=t0)
    return Attempt(reply=reply, failure=failure)


_BACKGROUND: set[asyncio.Future[Any]] = set()  # cancelled hedges still cleaning up


async def hedged(
    run: Callable[[asyncio.Event], Awaitable[Attempt[R]]],
    delay_s: Callable[[], float | None] | None,
    on_hedge: Callable[[], None] = lambda: None,
    on_hedge_win: Callable[[], None] = lambda: None,
) -> Attempt[R]:
    """``run(started)`` once; if it has not finished ``delay_s()`` seconds after it went out
    (``run`` sets ``started`` then, after any wait for the limiter; the delay is asked then,
    from the latencies known by then), once more beside it (a hedge).

    Why: a request stalled far past the observed latency tail (a stuck replica, a lost
    packet) usually answers sooner when sent again than when waited out to its timeout. The
    first reply wins and the other copy is cancelled (its limiter slot is given back); when
    one copy fails while the other still runs, the other is awaited, and when both fail the
    first failure is returned. ``delay_s`` None, or returning None: no hedge."""
    started = asyncio.Event()
    if delay_s is None:
        return await run(started)
    first = asyncio.ensure_future(run(started))
    pending: set[asyncio.Future[Any]] = {first}
    went_out = asyncio.ensure_future(started.wait())
    try:
        await asyncio.wait({first, went_out}, return_when=asyncio.FIRST_COMPLETED)
        delay = None if first.done() else delay_s()
        if delay is None:
            return await first
        await asyncio.wait({first}, timeout=delay)
        if first.done():
            return first.result()
        on_hedge()
        second = asyncio.ensure_future(run(asyncio.Event()))
        pending = {first, second}
        failed: Attempt[R] | None = None
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                res = task.result()
                if res.failure is None and not res.skipped:
                    if task is second:
                        on_hedge_win()
                    return res
                failed = failed if failed is not None else res
        assert failed is not None
        return failed
    finally:
        went_out.cancel()
        for task in pending:
            if not task.done():
                task.cancel()
                _BACKGROUND.add(task)
                task.add_done_callback(_BACKGROUND.discard)


# -- what a failed call means ----------------------------------------------------------------


# A 500 that is really a 4xx: the server's request validation (pydantic's "Input should
# be ...", llama-cpp-python), an unsupported format, or a chat template failing on the
# request's shape ("can only concatenate str (not "list") to str"). Retrying sends the same
# request to the same check.
_REJECTION = re.compile(
    r"input should be|validation error|literal_error|extra inputs are not permitted|"
    r"field required|not supported|unsupported|can only concatenate|response_format|"
    r"json_schema|invalid (request|value|type)|is not a valid|must be (a|one of)",
    re.IGNORECASE,
)
# What servers answer when a request's image parts reach a model that cannot see:
# llama-cpp-python's text chat templates (HTTP 500), OpenAI, vLLM and others (HTTP 400).
_NO_VISION = re.compile(
    r'can only concatenate str \(not "list"\) to str|image_url is only supported by certain|'
    r"not a multimodal model|does not support (image|vision)|(image|vision) (input )?is not "
    r"supported|does not accept images|cannot (read|see|process) images",
    re.IGNORECASE,
)


def cannot_see(failure: LLMCallError) -> bool:
    """Whether a failed request that carried images failed because the model takes none."""
    return failure.status is not None and bool(_NO_VISION.search(failure.reason))


_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|\n\s*File \"|^\s*File \"", re.M)
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.+-]+){2,}")
_PYDANTIC_ERR = re.compile(r"'loc': \(([^)]*)\), 'msg': (\"[^\"]*\"|'[^']*')")


def trim_server_error(message: str, limit: int = 300) -> str:
    """A server's error message fit for an error row: no traceback frames, no file paths,
    pydantic's dict dump read as ``loc: msg``, whitespace collapsed, at most ``limit`` chars."""
    m = _TRACEBACK.search(message)
    if m:
        message = message[: m.start()]
    found = _PYDANTIC_ERR.findall(message)
    if found:
        parts = []
        for loc, msg in found:
            where = ".".join(x.strip(" '\"") for x in loc.split(",") if x.strip())
            parts.append(f"{where}: {msg[1:-1]}")
        message = "; ".join(parts)
    message = _PATH.sub("<path>", message)
    message = " ".join(message.split()) or "(no message but a server traceback)"
    return message if len(message) <= limit else message[: limit - 1] + "…"


def error_from_status(
    status: int, message: str, code: str | None, headers: dict[str, str]
) -> LLMCallError:
    """Map an HTTP error to retryable (429/408/409/5xx) or terminal with a reason.

    A 5xx whose message is a request rejection (``_REJECTION``) is terminal and marked
    ``rejected``: the format negotiation steps down on it, and retries would not help."""
    message = trim_server_error(redact(message))
    if status == 429:
        return LLMCallError(
            f"HTTP 429 rate limited: {message}",
            retryable=True,
            status=429,
            retry_after_s=retry_after_from(headers),
            throttled=True,
            headers=headers,
        )
    if status >= 500 and _REJECTION.search(message):
        return LLMCallError(
            f"HTTP {status} (the server rejected the request): {message}",
            retryable=False,
            status=status,
            headers=headers,
            rejected=True,
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
            f"refused (content policy): {message}",
            retryable=False,
            status=status,
            headers=headers,
            refused=True,
        )
    return LLMCallError(
        f"HTTP {status}: {message}",
        retryable=False,
        status=status,
        headers=headers,
        rejected=status in (400, 415, 422) and bool(_REJECTION.search(message)),
    )


def rpc_retry_delay(details: Any) -> float | None:
    """Seconds from a google.rpc.RetryInfo detail ('2s', '0.5s') of a Gemini error body."""
    try:
        for d in details["error"].get("details", []):
            if str(d.get("@type", "")).endswith("RetryInfo"):
                m = re.match(r"([\d.]+)s", str(d.get("retryDelay", "")))
                if m:
                    return float(m.group(1))
    except (KeyError, TypeError, AttributeError):
        return None
    return None


@functools.cache
def httpx_modules() -> tuple[Any, ...]:
    """httpx, then the httpx2 fork when it is installed (google-genai prefers it then)."""
    import httpx

    try:
        import httpx2
    except ImportError:  # pragma: no cover - depends on the environment
        return (httpx,)
    return (httpx, httpx2)


def openai_status_error(exc: Any) -> LLMCallError:
    """An ``openai.APIStatusError`` as LLMCallError (message from the error body)."""
    headers = dict(exc.response.headers)
    body = exc.body if isinstance(exc.body, dict) else {}
    message = str(body.get("message") or exc.message)
    return error_from_status(exc.status_code, message, exc.code, headers)


@contextmanager
def openai_errors(
    timeout_s: float, status_error: Callable[[Any], LLMCallError] = openai_status_error
) -> Iterator[None]:
    """Raise one openai SDK call's failures as LLMCallError: timeouts and lost connections are
    retryable, HTTP errors go through ``status_error``."""
    import openai

    try:
        yield
    except openai.APITimeoutError as exc:
        raise LLMCallError(f"timeout after {timeout_s:g}s", retryable=True) from exc
    except openai.APIConnectionError as exc:
        raise LLMCallError(f"connection error: {redact(str(exc))}", retryable=True) from exc
    except openai.APIStatusError as exc:
        raise status_error(exc) from None


@contextmanager
def genai_errors(timeout_s: float) -> Iterator[None]:
    """Raise one google-genai call's failures as LLMCallError; a 429's wait comes from the
    body's RetryInfo, else the Retry-After headers."""
    from google.genai import errors

    mods = httpx_modules()
    timeouts = tuple(m.TimeoutException for m in mods)
    transport = tuple(m.TransportError for m in mods)
    try:
        yield
    except errors.APIError as exc:
        headers = dict(exc.response.headers) if getattr(exc, "response", None) else {}
        err = error_from_status(int(exc.code or 500), str(exc.message or exc), exc.status, headers)
        if err.retry_after_s is None:
            err.retry_after_s = rpc_retry_delay(exc.details) or retry_after_from(headers)
        raise err from None
    except timeouts as exc:
        raise LLMCallError(f"timeout after {timeout_s:g}s", retryable=True) from exc
    except transport as exc:
        raise LLMCallError(f"connection error: {redact(str(exc))}", retryable=True) from exc
