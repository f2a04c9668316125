"""Chat/vision model layer: one interface over OpenAI-compatible, Gemini and offline backends.

Stages call :func:`run_chat` once per shard; see docs/backends.md.
"""

from forenset.backends.llm.cache import ResponseCache, cache_key
from forenset.backends.llm.engine import (
    limiter_stats,
    reset_limiters,
    reset_stage,
    run_chat,
    stage_usage,
)
from forenset.backends.llm.jsonout import extract_json, parse_reply
from forenset.backends.llm.ledger import BatchLedger
from forenset.backends.llm.offline import OfflineChat, register_offline_task
from forenset.backends.llm.pool import choose_model
from forenset.backends.llm.types import (
    ChatRequest,
    ChatResult,
    ErrorRateExceeded,
    LLMCallError,
    LLMSettings,
    ModelSpec,
    StageAborted,
)

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
