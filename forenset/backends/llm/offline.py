"""Offline backend: the project's own algorithms behind the chat interface (no keys, no net)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from pydantic import BaseModel

from forenset.backends.llm.base import RawReply, Turns
from forenset.backends.llm.types import ChatRequest, LLMCallError, ModelSpec

OfflineFn = Callable[[ChatRequest], BaseModel | str]

_TASKS: dict[str, OfflineFn] = {}
_LOCK = threading.Lock()


def register_offline_task(task: str, fn: OfflineFn) -> None:
    """Route requests with ``request.task == task`` to ``fn`` (replaces an earlier one)."""
    with _LOCK:
        _TASKS[task] = fn


def offline_tasks() -> list[str]:
    with _LOCK:
        return sorted(_TASKS)


class OfflineChat:
    """Dispatches on ``request.task``; the function's output goes through the same validation."""

    name = "offline"

    async def complete(self, spec: ModelSpec, req: ChatRequest, extra: Turns) -> RawReply:
        with _LOCK:
            fn = _TASKS.get(req.task)
        if fn is None:
            raise LLMCallError(
                f"no offline algorithm registered for task '{req.task}'", retryable=False
            )
        try:
            out = await asyncio.to_thread(fn, req)
        except Exception as exc:  # an algorithm bug or a bad input: an error row
            raise LLMCallError(
                f"offline {req.task} failed: {exc!r}"[:500], retryable=False
            ) from exc
        text = out.model_dump_json() if isinstance(out, BaseModel) else str(out)
        return RawReply(text=text)
