"""prompts: one 5W+1H text-to-image prompt per scenario, near-duplicates removed.

Maps the scenarios shards (one per category). Because a category's scenarios are all in one
shard, the keep-first Jaccard dedupe (``dedupe_threshold``) runs per category inside a shard,
deterministically, and shards stay independent; prompts of different categories share little
text (measured in docs/text-stages.md), so no cross-shard pass is done. Offline: the template
constructor ``build_prompt`` (rebuilt while ``validate_prompt_record`` fails). With a model
pool: the ``prompt_5w1h`` template, regenerated with the validator's reasons.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pyarrow as pa
from pydantic import Field

from forenset.backends.llm.types import ChatRequest, LLMSettings
from forenset.confbase import Strict, operational
from forenset.schemas.prompts import SCHEMA
from forenset.seeds import rng_for
from forenset.tasks.base import ShardSpec
from forenset.tasks.modelcall import Outcome, Validator, model_stage_config, request
from forenset.tasks.strategy import ModelStrategy, OfflineStrategy, StrategyStage
from forenset.text.models import FiveW1HPrompt
from forenset.text.safety_prompts import (
    PromptRecord,
    build_prompt,
    dedupe,
    prompt_5w1h_vars,
    record_from_llm,
    validate_prompt_record,
)
from forenset.text.taxonomy import Scenario, get_category, taxonomy_hash


class PromptsConfig(Strict):
    """5W+1H text-to-image prompts, one per scenario, near-duplicates removed per category."""

    dedupe_threshold: float = Field(0.6, gt=0, le=1)
    llm: LLMSettings | None = None  # prompt_5w1h template; None: the offline constructor
    max_attempts: int = Field(5, ge=1, le=10)
    prompts_dir: str | None = operational(None)  # templates are fingerprinted by content


TEMPLATES = ("prompt_5w1h",)


def record_row(rec: PromptRecord) -> dict[str, Any]:
    d = rec.row()
    d["prompt_uid"] = d.pop("prompt_id")
    d.pop("prompt_template_id", None)
    d.pop("prompt_template_hash", None)
    return d


def scenario_of(row: dict[str, Any]) -> tuple[Scenario, dict[str, Any]]:
    """An input row's scenario, and the row with its media form and content (which a failed
    prompt's error row shows)."""
    sc = Scenario.model_validate_json(row["scenario"])
    return sc, {**row, "media_form": sc.media_form, "content": sc.content}


class PromptsOffline(OfflineStrategy["Prompts", PromptsConfig]):
    """The template constructor ``build_prompt``, rebuilt while validation fails."""

    stage: Prompts
    timed = False  # rows keep their shape (no per-row timing)

    def run(self, batch: pa.Table, shard: ShardSpec | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for row in batch.to_pylist():
            out.extend(self.isolated(row, partial(self.prompt, row)))
        return self.stage.deduped(out)

    def prompt(self, row: dict[str, Any]) -> dict[str, Any]:
        c, stage = self.cfg, self.stage
        sc = Scenario.model_validate_json(row["scenario"])
        cat = get_category(sc.category)
        rng = rng_for(self.ctx.seed, stage.name, sc.scenario_id)
        problems: list[str] = []
        for _ in range(c.max_attempts):
            rec = build_prompt(sc, rng, cat)
            problems = validate_prompt_record(rec, cat)
            if not problems:
                return {
                    **record_row(rec),
                    "status": "ok",
                    "backend": "offline",
                    "model": rec.builder,
                }
        return stage.failed(
            sc, f"prompt failed validation after {c.max_attempts} attempts: {'; '.join(problems)}"
        )


class PromptsModel(ModelStrategy["Prompts", PromptsConfig]):
    """The ``prompt_5w1h`` template per scenario, regenerated with the validator's reasons."""

    stage: Prompts

    def ask(self, row: dict[str, Any]) -> tuple[Scenario, dict[str, Any], ChatRequest, Validator]:
        sc, keyed = scenario_of(row)
        req = request(
            "prompts",
            sc.scenario_id,
            "prompt_5w1h",
            self.cfg.prompts_dir,
            response_model=FiveW1HPrompt,
            **prompt_5w1h_vars(sc, get_category(sc.category)),
        )

        def check(reply: FiveW1HPrompt) -> list[str]:
            return record_from_llm(sc, reply, req.prompt_id, req.prompt_hash)[1]

        return sc, keyed, req, check

    def record(self, sc: Scenario, o: Outcome) -> dict[str, Any]:
        if not o.ok:
            return self.stage.failed(sc, "", **o.trace())
        rec, _ = record_from_llm(sc, o.parsed(), o.result.prompt_id, o.result.prompt_hash)
        return {**record_row(rec), **o.trace()}

    def run(self, batch: pa.Table, shard: ShardSpec | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        asks: dict[str, tuple[Scenario, dict[str, Any], ChatRequest, Validator]] = {}
        for row in batch.to_pylist():
            made = self.prepare(row, out, partial(self.ask, row))
            if made is not None:
                asks[made[0].scenario_id] = made
        done = self.call([(req, check) for _, _, req, check in asks.values()])
        for sid, (sc, keyed, _, _) in asks.items():
            out.extend(self.convert(keyed, done[sid], partial(self.record, sc, done[sid])))
        return self.stage.deduped(out)


class Prompts(StrategyStage[PromptsConfig]):
    name = "prompts"
    config_model = PromptsConfig
    version = "1"
    inputs = ("scenarios",)
    input_columns = ("scenario_id", "category", "scenario")
    output_schema = SCHEMA
    key = "prompt_uid"
    offline_strategy = PromptsOffline
    model_strategy = PromptsModel

    def stage_config(self) -> dict[str, Any]:
        return {
            **model_stage_config(self.cfg, TEMPLATES),
            "taxonomy": taxonomy_hash(),
        }

    def deduped(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Keep-first Jaccard dedupe over the ok prompts (both strategies); error rows stay."""
        ok = [r for r in rows if r["status"] == "ok"]
        kept = {id(r) for r in dedupe(ok, self.cfg.dedupe_threshold, key=lambda r: r["prompt"])}
        return [r for r in rows if r["status"] != "ok" or id(r) in kept]

    def failed(self, sc: Scenario, message: str, **trace: Any) -> dict[str, Any]:
        """A scenario whose prompt failed validation (both strategies)."""
        return {
            "prompt_uid": f"{sc.scenario_id}-error",
            "scenario_id": sc.scenario_id,
            "category": sc.category,
            "media_form": sc.media_form,
            "content": sc.content,
            "status": "error",
            "error": message,
            "retryable": False,
            "backend": "offline",
            "stage_version": self.version,
            **trace,
        }

    def error_row(self, row: dict[str, Any], message: str, retryable: bool) -> dict[str, Any]:
        """An unexpected failure of a scenario, keyed '<scenario_id>-error' like ``failed``."""
        out = super().error_row(row, message, retryable)
        return {**out, "prompt_uid": f"{row['scenario_id']}-error"}
