"""Chat/vision model layer: one interface over OpenAI-compatible, Gemini and offline backends.

Stages call :func:`run_chat` once per shard; see docs/backends.md.

The names below are imported on first use (PEP 562): the build config imports
``forenset.backends.llm.types``, and an eager package would load the OpenAI and Gemini SDKs
(~0.8 s) into every command that only reads a config or a run.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "ResponseCache": "cache",
    "cache_key": "cache",
    "limiter_stats": "engine",
    "reset_limiters": "engine",
    "reset_stage": "engine",
    "run_chat": "engine",
    "stage_usage": "engine",
    "extract_json": "jsonout",
    "parse_reply": "jsonout",
    "BatchLedger": "ledger",
    "OfflineChat": "offline",
    "register_offline_task": "offline",
    "choose_model": "pool",
    "ChatRequest": "types",
    "ChatResult": "types",
    "ErrorRateExceeded": "types",
    "LLMCallError": "types",
    "LLMSettings": "types",
    "ModelSpec": "types",
    "StageAborted": "types",
    "VisionUnsupported": "types",
}

__all__ = [
    "BatchLedger",
    "ChatRequest",
    "ChatResult",
    "ErrorRateExceeded",
    "LLMCallError",
    "LLMSettings",
    "ModelSpec",
    "OfflineChat",
    "ResponseCache",
    "StageAborted",
    "VisionUnsupported",
    "cache_key",
    "choose_model",
    "extract_json",
    "limiter_stats",
    "parse_reply",
    "register_offline_task",
    "reset_limiters",
    "reset_stage",
    "run_chat",
    "stage_usage",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
