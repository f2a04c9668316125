"""The engine's per-stage and per-item bookkeeping, in a module of its own so that batch mode
(``batch.py``, which the engine imports lazily) can name these types without importing the
engine back."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from forenset.backends.llm.types import (
    ChatRequest,
    ErrorRateExceeded,
    ModelSpec,
    SameFailure,
    VisionUnsupported,
)


@dataclass
class StageState:
    """Per (stage, build seed) and process: error window, abort flag, spend and tokens."""

    window: deque[bool]
    aborted: str | None = None
    spent_usd: float = 0.0
    reserved_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    cached: int = 0
    errors: int = 0
    ok: int = 0
    same_error: str | None = None  # the server failure every finished call so far ended with
    same_count: int = 0
    fatal: bool = False  # aborted because every call failed the same way: stops the build
    blind: bool = False  # aborted because the model cannot take the stage's images

    def raise_aborted(self) -> None:
        assert self.aborted is not None
        if self.blind:
            raise VisionUnsupported(self.aborted)
        raise (SameFailure if self.fatal else ErrorRateExceeded)(self.aborted)

    def snapshot(self) -> dict[str, Any]:
        return {
            "spent_usd": self.spent_usd,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "calls": self.calls,
            "cached": self.cached,
            "errors": self.errors,
            "aborted": self.aborted,
        }


@dataclass
class _Item:
    """Mutable per-item bookkeeping across attempts."""

    req: ChatRequest
    spec: ModelSpec
    key: str
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    refused_by: str | None = None
    output_mode: str | None = None
    regenerations: int = 0
    grown: int = 0  # retries with more output room after finish_reason length
    server_failure: bool = False  # the last failure came from the transport / server
    t0: float = field(default_factory=time.monotonic)
