"""Shared plumbing for model-using stages: fingerprints, one run_chat per round, regeneration.

Every model stage does the same three things: put the pool's identity and the templates'
content hashes in its fingerprint, send one batch of requests per shard, and send a new
request (the validator's reasons appended, a new seed) for replies that parse but fail the
stage's checks. Keeping that here keeps the five stages small and alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from forenset.backends.llm.types import ChatRequest, ChatResult, LLMSettings
from forenset.confbase import Strict, fingerprint_view, operational
from forenset.seeds import derive_seed
from forenset.tasks.base import StageContext
from forenset.text.templates import load_template


class ModelStageConfig(Strict):
    """Shared by every model-using stage. ``llm: None`` keeps the offline algorithm (the demo).

    ``llm`` set: one chat request per item through ``forenset.backends.llm.run_chat``; replies
    failing the stage's validators are regenerated up to ``max_attempts`` times. Templates are
    read from ``prompts_dir`` (default: the packaged forenset/prompts); their content hash, not
    the folder name, goes into the fingerprint.
    """

    llm: LLMSettings | None = None
    max_attempts: int = Field(3, ge=1, le=10)
    # the templates' content hashes are fingerprinted, not the folder they are read from
    prompts_dir: str | None = operational(None)

    @model_validator(mode="before")
    @classmethod
    def _drop_legacy_backend(cls, data: Any) -> Any:
        """Run directories built before 2026-12 saved ``backend: offline`` (the only value it
        ever had; ``llm`` picks the path), and ``forenset split`` re-reads that config."""
        if isinstance(data, dict) and data.get("backend") == "offline":
            data = {k: v for k, v in data.items() if k != "backend"}
        return data


# Usage columns the model stages' schemas carry next to the common trace columns.
USAGE = ("input_tokens", "output_tokens", "cost_usd", "cached")

Validator = Callable[[Any], list[str]]


def template_hashes(ids: Sequence[str], root: str | None) -> dict[str, str]:
    return {t: load_template(t, root).content_hash for t in ids}


def model_stage_config(cfg: Any, templates: Sequence[str]) -> dict[str, Any]:
    """The fingerprinted config of a model stage: its fingerprinted fields (the pool's identity,
    not its rate limits or keys) and, when a model is used, the content hash of every template
    it renders."""
    d = fingerprint_view(cfg)
    if getattr(cfg, "llm", None) is not None:
        d["templates"] = template_hashes(templates, getattr(cfg, "prompts_dir", None))
    return d


# One ChatRequest from a project template (the stages call it ``request``).
request = ChatRequest.from_template


@dataclass
class Outcome:
    """An item's last result, what its validator said, and the usage summed over attempts."""

    result: ChatResult
    problems: list[str]
    attempts: int
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cached: bool = True

    @property
    def ok(self) -> bool:
        return self.result.ok and not self.problems

    def parsed(self) -> Any:
        return self.result.parsed

    def trace(self) -> dict[str, Any]:
        """Row columns: the result's trace, the validation failure as the error, summed usage."""
        t = self.result.trace()
        out = {k: t[k] for k in ("backend", "model", "prompt_id", "prompt_hash")}
        out.update(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost_usd=self.cost_usd,
            cached=self.cached,
            refused_by=self.result.refused_by,
            output_mode=self.result.output_mode,
            regenerations=self.result.regenerations,
        )
        if not self.result.ok:
            out.update(status="error", error=self.result.error, retryable=self.result.retryable)
        elif self.problems:
            out.update(
                status="error",
                error=f"reply failed validation after {self.attempts} attempt"
                f"{'s' if self.attempts > 1 else ''}: " + "; ".join(self.problems),
                retryable=False,
            )
        else:
            out.update(status="ok", error=None, retryable=False)
        return out


def feedback(req: ChatRequest, base_user: str, problems: list[str], attempt: int, seed: int):
    """A new request for a rejected reply: the reasons appended, a new seed (new cache key)."""
    note = (
        "\n\nYour previous reply was rejected for these reasons:\n"
        + "\n".join(f"- {p}" for p in problems)
        + "\nWrite a new reply that fixes every one of them."
    )
    return dataclasses.replace(req, user=base_user + note, seed=derive_seed(seed, attempt))


def call_validated(
    ctx: StageContext,
    stage: str,
    settings: LLMSettings,
    items: Sequence[tuple[ChatRequest, Validator]],
    max_attempts: int,
) -> dict[str, Outcome]:
    """Run requests (one run_chat per round); regenerate replies whose validator complains.

    Transport / parse errors are final here: run_chat already retried and repaired them.
    ``ErrorRateExceeded`` propagates (the flow reports the shard as failed).
    """
    from forenset.backends.llm import ResponseCache, run_chat  # loads the SDK clients

    cache = ResponseCache(ctx.store.fs, ctx.store.root)
    base = {req.item_id: (req, req.user, check) for req, check in items}
    pending = [req for req, _ in items]
    out: dict[str, Outcome] = {}
    for attempt in range(1, max_attempts + 1):
        if not pending:
            break
        results = run_chat(pending, settings, build_seed=ctx.seed, stage=stage, cache=cache)
        nxt: list[ChatRequest] = []
        for req, res in zip(pending, results, strict=True):
            prev = out.get(req.item_id)
            o = Outcome(res, [], attempt)
            if prev is not None:
                o.input_tokens, o.output_tokens = prev.input_tokens, prev.output_tokens
                o.cost_usd, o.cached = prev.cost_usd, prev.cached
            o.input_tokens += res.input_tokens
            o.output_tokens += res.output_tokens
            o.cost_usd += res.cost_usd
            o.cached = o.cached and res.cached
            if res.ok:
                _, user, check = base[req.item_id]
                try:
                    o.problems = list(check(res.parsed))
                except Exception as e:  # noqa: BLE001 - a validator crash is a failed check
                    o.problems = [f"validator failed: {type(e).__name__}: {e}"]
                if o.problems and attempt < max_attempts:
                    seed = derive_seed(ctx.seed, stage, req.item_id, "regenerate")
                    nxt.append(feedback(req, user, o.problems, attempt, seed))
            out[req.item_id] = o
        pending = nxt
    return out


def set_usage(rows: list[dict[str, Any]], outcomes: Sequence[Outcome]) -> None:
    """Rows made from shared calls (an image's edit set, a category's scenarios): the calls'
    usage goes on the first row and 0 on the others, so SUM(cost_usd) over a table is right."""
    for i, r in enumerate(rows):
        first = i == 0
        r["input_tokens"] = sum(o.input_tokens for o in outcomes) if first else 0
        r["output_tokens"] = sum(o.output_tokens for o in outcomes) if first else 0
        r["cost_usd"] = sum(o.cost_usd for o in outcomes) if first else 0.0
        r["cached"] = all(o.cached for o in outcomes)
