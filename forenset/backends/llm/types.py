"""Requests, results, config models and errors of the chat-model layer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from forenset.backends.llm import registry
from forenset.confbase import operational
from forenset.errors import ForensetError, ModelServiceError

# How a request asks for structured output, most to least enforced by the server:
# json_schema (OpenAI, vLLM, SGLang), json_object with a "schema" (llama.cpp servers),
# json_object (the schema in the prompt), prompt (no response_format; the reply validated).
OUTPUT_MODES = ("json_schema", "json_object_schema", "json_object", "prompt")
# a request's output room when neither its prompt nor its stage's llm.max_tokens sets one
DEFAULT_MAX_TOKENS = 1024


@dataclass
class ChatRequest:
    """One model call for one item: rendered prompts, images in order, expected output model."""

    task: str
    item_id: str
    system: str
    user: str
    images: list[bytes] = field(default_factory=list)
    response_model: type[BaseModel] | None = None
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int | None = None
    prompt_id: str = ""
    prompt_hash: str = ""

    @classmethod
    def from_template(
        cls,
        task: str,
        item_id: str,
        template: str,
        root: str | Path | None,
        *,
        images: Sequence[bytes] = (),
        response_model: type[BaseModel] | None = None,
        **variables: object,
    ) -> ChatRequest:
        """One request from a project template: its id@version and content hash travel with
        it, so rows and caches say which prompt produced them; its declared ``max_tokens``
        sizes the reply (a stage's ``llm.max_tokens`` overrides it)."""
        from forenset.text.templates import load_template, render

        system, user, pid, phash = render(template, root, **variables)
        return cls(
            max_tokens=load_template(template, root).max_tokens,
            task=task,
            item_id=item_id,
            system=system,
            user=user,
            images=list(images),
            response_model=response_model,
            prompt_id=pid,
            prompt_hash=phash,
        )

    def __repr__(self) -> str:  # images can be megabytes: keep reprs short
        return (
            f"ChatRequest(task={self.task!r}, item_id={self.item_id!r}, "
            f"images={len(self.images)}, prompt_id={self.prompt_id!r})"
        )


@dataclass
class ChatResult:
    """One item's outcome; errors are values (status='error', error=reason)."""

    item_id: str
    status: Literal["ok", "error"]
    parsed: BaseModel | None = None
    text: str = ""
    error: str | None = None
    retryable: bool = False
    backend: str = ""
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    cached: bool = False
    attempts: int = 0
    task: str = ""
    prompt_id: str = ""
    prompt_hash: str = ""
    cache_key: str = ""
    batch_id: str | None = None
    refused_by: str | None = None  # backend/model that refused before another pool model answered
    output_mode: str | None = None  # how structured output was asked for (see OUTPUT_MODES)
    regenerations: int = 0  # same-model re-asks after a refusal or a cut reply

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def trace(self) -> dict[str, Any]:
        """The scalar tracing columns a stage row carries (everything but parsed/text)."""
        return {
            "status": self.status,
            "error": self.error,
            "retryable": self.retryable,
            "backend": self.backend,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "latency_s": self.latency_s,
            "cached": self.cached,
            "attempts": self.attempts,
            "prompt_id": self.prompt_id,
            "prompt_hash": self.prompt_hash,
            "batch_id": self.batch_id,
        }


class ModelSpec(BaseModel):
    """One entry of a model pool (config). Keys are named by env var, never stored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: str  # a registered chat backend (backends/llm/registry.py)
    model: str
    weight: float = Field(1.0, gt=0)
    base_url: str | None = None
    api_key_env: str | None = operational(None)
    api_version: str | None = operational(None)  # gemini: "v1beta" (default) or "v1"
    rpm: float | None = operational(
        None, gt=0
    )  # requests / minute (None: unlimited until headers say)
    tpm: float | None = operational(None, gt=0)  # tokens / minute
    max_concurrency: int = operational(16, ge=1)
    # ask a self-hosted server (base_url) how many requests it generates at once, and send
    # no more: llama.cpp's /props total_slots; llama-cpp-python's server: one
    detect_slots: bool = operational(True)
    price_in_per_mtok: float = operational(0.0, ge=0)  # USD per 1M input tokens
    price_out_per_mtok: float = operational(0.0, ge=0)
    timeout_s: float = operational(60.0, gt=0)
    batch: bool = operational(False)  # OpenAI Batch API (50 % price, hours of latency)
    batch_price_factor: float = operational(0.5, gt=0)
    batch_poll_s: float = operational(30.0, gt=0)
    batch_wait_s: float = operational(24 * 3600.0, ge=0)  # give up waiting (items retryable) after
    prefect_rate_limit: str | None = operational(None)  # name of a Prefect global concurrency limit
    # models that share one provider limit (one self-hosted server) pace through one limiter
    rate_group: str | None = operational(None)
    # how structured output is asked for (OUTPUT_MODES); "auto" starts with json_schema and
    # steps down when the server rejects the format (llama.cpp: json_object + schema)
    structured_output: Literal[
        "auto", "json_schema", "json_object_schema", "json_object", "prompt"
    ] = operational("auto")
    # overload vs one item's bad luck (limits.OutcomeWindow): over the last overload_window
    # calls, 429s at least overload_429_share of it, or a median latency overload_latency_climb
    # x the lowest seen, cut the concurrency (and for 429s the pace, and hold for the
    # Retry-After); a lone 429 or 500 delays only its own item. 64, not 32: sporadic 6 %
    # 429s reach 8 of 32 in about 1 run in 10 of 640 calls (a false cut costs ~2 s of pace)
    overload_window: int = operational(64, ge=4)
    overload_429_share: float = operational(0.25, gt=0, le=1)
    overload_latency_climb: float = operational(3.0, gt=1)
    # a request unanswered after hedge_multiplier x the p95 latency of recent successes (at
    # least hedge_floor_s, at most timeout_s / 2, 20 seen) is sent again; the first answer
    # wins, the other is cancelled. 0 turns hedging off (a paid API may bill both copies);
    # never on a server that reports its generation slots (a copy would queue behind it)
    hedge_multiplier: float = operational(3.0, ge=0)
    hedge_floor_s: float = operational(1.0, ge=0)
    params: dict[str, Any] = Field(default_factory=dict)  # extra body / config fields

    @field_validator("backend")
    @classmethod
    def _registered(cls, v: str) -> str:
        return registry.check_name(v)

    @property
    def label(self) -> str:
        return f"{self.backend}/{self.model}"


class LLMSettings(BaseModel):
    """Stage-level settings: the model pool and the guards that stop a stage early."""

    model_config = ConfigDict(extra="forbid")

    pool: list[ModelSpec] = Field(min_length=1)
    max_retries: int = operational(5, ge=0)  # transport retries per item (429/5xx/timeouts)
    backoff_base_s: float = operational(0.5, ge=0)
    backoff_max_s: float = operational(30.0, ge=0)
    repair_retries: int = Field(1, ge=0)  # invalid JSON / schema -> show the model the error
    # output room of every request of the stage; None: each prompt's own (its template's
    # max_tokens, sized to its schema), else DEFAULT_MAX_TOKENS. A reply cut there
    # (finish_reason length) is asked again once, told to be brief and given length_growth x
    # the room, then is an error row
    max_tokens: int | None = Field(None, ge=1)
    length_growth: float = operational(2.0, ge=1)
    # same-model re-asks (new seed) after a refusal or a cut reply, before the pool fallback
    regenerations: int = operational(2, ge=0)
    # a stage whose calls all fail the same way at the server, with no success yet, stops the
    # build (one sentence, non-zero exit) instead of writing error rows: after N alike when
    # the failure cannot depend on the item (rejected request form, wrong key or model, no
    # connection), else when a shard's every call failed alike
    fail_fast_after: int = operational(3, ge=1)
    max_error_rate: float = operational(0.5, ge=0, le=1)  # over the sliding window
    error_window: int = operational(20, ge=1)
    budget_usd: float | None = operational(None, ge=0)  # per stage and process; None = no cap

    @model_validator(mode="after")
    def _unique_labels(self) -> LLMSettings:
        labels = [(s.backend, s.base_url, s.model) for s in self.pool]
        if len(set(labels)) != len(labels):
            raise ValueError("pool lists the same (backend, base_url, model) twice")
        return self


class LLMCallError(ForensetError):
    """One failed attempt. ``retryable`` decides between backoff and a terminal error row."""

    def __init__(
        self,
        reason: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after_s: float | None = None,
        throttled: bool = False,
        headers: dict[str, str] | None = None,
        refused: bool = False,
        rejected: bool = False,
    ) -> None:
        super().__init__(reason)
        self.rejected = rejected  # the server refused the request's form (not retryable)
        self.refused = refused  # the model declined (content policy): another model may not
        self.reason = reason
        self.retryable = retryable
        self.status = status
        self.retry_after_s = retry_after_s
        self.throttled = throttled
        self.headers = headers or {}


class StageAborted(ForensetError, RuntimeError):
    """Base for stage-level aborts raised by run_chat."""


class ErrorRateExceeded(StageAborted):
    """Too many failed items in the sliding window; the message is one sentence."""


class SameFailure(StageAborted, ModelServiceError):
    """Every call of a stage failed the same way at the server (it rejects the requests or
    is down): the build stops with this one sentence (a ConfigurationError: non-zero exit)."""


class VisionUnsupported(SameFailure):
    """A stage sends images to a model that cannot take them (its server says so, or answers
    image parts with an error only a text-only model gives): the build stops at once with one
    sentence naming the model and the stage."""
