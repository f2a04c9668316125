"""The process's one event loop for model API calls, and what is bound to it.

Why one loop, shared by the chat engine and the image clients: a provider's account limits
cover chat and image calls alike, so both must pace through the same limiter per
(backend, base_url, model). asyncio primitives (the limiters) and httpx pools (the SDK
clients) belong to the loop they were first used on, and stages call us from several Prefect
worker threads, so the process owns exactly one loop in a daemon thread; ``submit`` runs a
coroutine there and blocks the calling thread on its result. Limiters and clients are only
touched on that thread, so no locks are needed on the hot path.

The SDKs are imported when a client is first built, never at import time.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from forenset.backends.llm.limits import ModelLimiter
from forenset.backends.llm.secrets import api_key
from forenset.backends.llm.types import LLMCallError, ModelSpec
from forenset.backends.retry import httpx_modules

if TYPE_CHECKING:
    import openai
    from google import genai

T = TypeVar("T")

_SELF_HOSTED_KEY = "not-needed"  # placeholder when api_key_env is None (vLLM/SGLang/Ollama)


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="forenset-api", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()


_LOOP: _LoopThread | None = None
_LOOP_LOCK = threading.Lock()
_LIMITERS: dict[tuple[str, str, str], ModelLimiter] = {}
_OPENAI: dict[tuple[str | None, str | None, float], Any] = {}
_GENAI: dict[tuple[Any, ...], Any] = {}


def _loop_thread() -> _LoopThread:
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            _LOOP = _LoopThread()
        return _LOOP


def loop() -> asyncio.AbstractEventLoop:
    """The process's API loop, started on first use."""
    return _loop_thread().loop


def submit(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the API loop and wait for its result (from any thread but the loop's)."""
    lt = _loop_thread()
    if threading.current_thread() is lt.thread:
        coro.close()
        raise RuntimeError("a blocking model API call was made from inside the API loop")
    return asyncio.run_coroutine_threadsafe(coro, lt.loop).result()


def limiter_for(spec: ModelSpec) -> ModelLimiter:
    """The limiter of (backend, base_url, model), or of (backend, base_url, rate_group) for
    models that share one limit; the first spec to ask sets its numbers.

    Call on the API loop only."""
    key = (spec.backend, spec.base_url or "", spec.rate_group or spec.model)
    if key not in _LIMITERS:
        _LIMITERS[key] = ModelLimiter.from_spec(spec)
    return _LIMITERS[key]


def reset_limiters() -> None:
    """Forget every learned limit and pause (tests; a new provider account in one process)."""

    async def drop() -> None:
        _LIMITERS.clear()

    submit(drop())


def openai_client(spec: ModelSpec) -> openai.AsyncOpenAI:
    """One AsyncOpenAI per (base_url, key env, timeout), SDK retries off (we count attempts).

    A named key env var that is unset raises a terminal LLMCallError naming it."""
    ck = (spec.base_url, spec.api_key_env, spec.timeout_s)
    if ck not in _OPENAI:
        import openai

        key = api_key(spec.api_key_env)
        if spec.api_key_env and key is None:
            raise LLMCallError(
                f"environment variable {spec.api_key_env} is not set", retryable=False
            )
        _OPENAI[ck] = openai.AsyncOpenAI(
            api_key=key or _SELF_HOSTED_KEY,
            base_url=spec.base_url,
            max_retries=0,
            timeout=spec.timeout_s,
        )
    return _OPENAI[ck]


def genai_client(spec: ModelSpec) -> genai.Client:
    """One genai.Client per (base_url, key env, timeout, api_version), SDK retries off.

    A missing key raises a terminal LLMCallError naming the env var."""
    ck = (spec.base_url, spec.api_key_env, spec.timeout_s, spec.api_version)
    if ck not in _GENAI:
        from google import genai
        from google.genai import types

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
            # timeouts, exception mapping and key-scrubbed request logs do not apply. The last
            # module is the one google-genai uses (the httpx2 fork when it is installed).
            async_client_args={"transport": httpx_modules()[-1].AsyncHTTPTransport()},
        )
        _GENAI[ck] = genai.Client(api_key=key, http_options=opts)
    return _GENAI[ck]
