"""Columns every stage row carries: status, error and provenance (backend, model, prompt, seed...)."""

from __future__ import annotations

import pyarrow as pa

S, I64, F64, B = pa.string(), pa.int64(), pa.float64(), pa.bool_()

TRACE_FIELDS: list[pa.Field] = [
    pa.field("status", S, nullable=False),  # ok | error
    pa.field("error", S),  # one clear sentence when status='error'
    pa.field("retryable", B),  # resume retries these (transient); terminal errors stay
    pa.field("backend", S),  # offline | openai | gemini | diffusers
    pa.field("model", S),
    pa.field("prompt_id", S),
    pa.field("prompt_hash", S),
    pa.field("seed", I64),
    pa.field("stage_version", S),
    pa.field("elapsed_ms", F64),
]
TRACE_NAMES = [f.name for f in TRACE_FIELDS]
VOLATILE = {
    "elapsed_ms",
    "latency_s",
}  # differs between identical runs; excluded from content ids and comparisons


def stage_schema(*fields: pa.Field) -> pa.Schema:
    return pa.schema(list(fields) + TRACE_FIELDS)


# Usage columns of model-using stages (tokens and USD summed over an item's attempts; cached:
# every attempt was answered from the run's response cache; refused_by: see below).
USAGE_FIELDS: list[pa.Field] = [
    pa.field("input_tokens", I64),
    pa.field("output_tokens", I64),
    pa.field("cost_usd", F64),
    pa.field("cached", B),
    # the pool model that refused before another one answered (one retry after a refusal)
    pa.field("refused_by", S),
    # how structured output was asked for (json_schema | json_object_schema | json_object |
    # prompt), negotiated per model; and the same-model re-asks after a refusal or a cut reply
    pa.field("output_mode", S),
    pa.field("regenerations", I64),
]
