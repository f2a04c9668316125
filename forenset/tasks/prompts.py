"""prompts: one 5W+1H text-to-image prompt per scenario, near-duplicates removed.

Maps the scenarios shards (one per category). Because a category's scenarios are all in one
shard, the keep-first Jaccard dedupe (``dedupe_threshold``) runs per category inside a shard,
deterministically, and shards stay independent; prompts of different categories share little
text (measured in docs/text-stages.md), so no cross-shard pass is done. Offline: the template
constructor ``build_prompt`` (rebuilt while ``validate_prompt_record`` fails). With a model
pool: the ``prompt_5w1h`` template, regenerated with the validator's reasons.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pydantic import Field

from forenset.backends.llm.types import LLMSettings
from forenset.confbase import Strict, operational
from forenset.schemas.prompts import SCHEMA
from forenset.seeds import rng_for
from forenset.tasks.base import ShardSpec, Stage
from forenset.tasks.modelcall import Outcome, call_validated, model_stage_config, request
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


class Prompts(Stage):
    name = "prompts"
    config_model = PromptsConfig
    version = "1"
    inputs = ("scenarios",)
    input_columns = ("scenario_id", "category", "scenario")
    output_schema = SCHEMA
    key = "prompt_uid"

    def stage_config(self) -> dict[str, Any]:
        return {
            **model_stage_config(self.cfg, TEMPLATES),
            "taxonomy": taxonomy_hash(),
        }

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        c = self.cfg
        scenarios = [Scenario.model_validate_json(r["scenario"]) for r in batch.to_pylist()]
        if c.llm is None:
            built = [self._offline(sc) for sc in scenarios]
        else:
            built = self._llm(scenarios)
        ok = [(rec, tr) for rec, tr in built if rec is not None]
        kept = {id(r) for r in dedupe([rec for rec, _ in ok], c.dedupe_threshold)}
        out = []
        for rec, tr in built:
            if rec is None:
                out.append(tr)
            elif id(rec) in kept:
                out.append({**record_row(rec), **tr, "stage_version": self.version})
        return self.to_table(out)

    def _offline(self, sc: Scenario) -> tuple[PromptRecord | None, dict[str, Any]]:
        c = self.cfg
        cat = get_category(sc.category)
        rng = rng_for(self.ctx.seed, self.name, sc.scenario_id)
        problems: list[str] = []
        for _ in range(c.max_attempts):
            rec = build_prompt(sc, rng, cat)
            problems = validate_prompt_record(rec, cat)
            if not problems:
                return rec, {"status": "ok", "backend": "offline", "model": rec.builder}
        return None, self._error(
            sc, f"prompt failed validation after {c.max_attempts} attempts: {'; '.join(problems)}"
        )

    def _error(self, sc: Scenario, message: str, **trace: Any) -> dict[str, Any]:
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

    def _llm(self, scenarios: list[Scenario]) -> list[tuple[PromptRecord | None, dict[str, Any]]]:
        c = self.cfg
        items = []
        for sc in scenarios:
            cat = get_category(sc.category)
            req = request(
                "prompts",
                sc.scenario_id,
                "prompt_5w1h",
                c.prompts_dir,
                response_model=FiveW1HPrompt,
                **prompt_5w1h_vars(sc, cat),
            )

            def check(reply: FiveW1HPrompt, sc=sc, req=req) -> list[str]:
                return record_from_llm(sc, reply, req.prompt_id, req.prompt_hash)[1]

            items.append((req, check))
        done = call_validated(self.ctx, self.name, c.llm, items, c.max_attempts)
        out: list[tuple[PromptRecord | None, dict[str, Any]]] = []
        for sc in scenarios:
            o: Outcome = done[sc.scenario_id]
            if not o.ok:
                out.append((None, self._error(sc, "", **o.trace())))
                continue
            rec, _ = record_from_llm(sc, o.parsed(), o.result.prompt_id, o.result.prompt_hash)
            out.append((rec, o.trace()))
        return out
