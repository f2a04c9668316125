"""scenarios: the safety taxonomy's scenario instances s = (R_c, e, m) + detail, one shard per
safety category (docs/text-stages.md).

A source-like stage (no inputs): the taxonomy file is its input, so its hash is in the
fingerprint. Offline: ``sample_scenarios`` (every compatible content x media-form pair once
before repeats). With a model pool: the ``scenario_expansion`` template, one request per
category; proposals naming an unknown media form or holding placeholders are dropped, and the
request is regenerated (with the reasons) while fewer than ``per_category`` remain.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pyarrow as pa
from pydantic import Field

from forenset.backends.llm.types import ChatRequest, LLMSettings
from forenset.confbase import Strict, operational
from forenset.schemas.scenarios import SCHEMA
from forenset.seeds import rng_for
from forenset.tasks.base import ShardSpec
from forenset.tasks.modelcall import Outcome, Validator, model_stage_config, request, set_usage
from forenset.tasks.strategy import ModelStrategy, OfflineStrategy, StrategyStage
from forenset.text.models import ScenarioExpansion
from forenset.text.safety_prompts import scenario_expansion_vars, scenarios_from_llm
from forenset.text.taxonomy import (
    Category,
    Scenario,
    get_category,
    load_taxonomy,
    sample_scenarios,
    taxonomy_hash,
)


class ScenariosConfig(Strict):
    """Scenario instances of the safety taxonomy, one shard per category (12 by default)."""

    enabled: bool = True
    per_category: int = Field(12, ge=1, le=10_000)
    categories: list[str] | None = None  # None: all of taxonomy.yaml
    llm: LLMSettings | None = None  # scenario_expansion template; None: sample_scenarios
    max_attempts: int = Field(3, ge=1, le=10)
    prompts_dir: str | None = operational(None)  # templates are fingerprinted by content


TEMPLATES = ("scenario_expansion",)


def unique_ids(scenarios: list[Scenario]) -> list[Scenario]:
    """Repeats of a (content, media, detail) triple get '-r<k>' ids, so each row keys once."""
    seen: dict[str, int] = {}
    out = []
    for sc in scenarios:
        k = seen.get(sc.scenario_id, 0)
        seen[sc.scenario_id] = k + 1
        out.append(
            sc if k == 0 else sc.model_copy(update={"scenario_id": f"{sc.scenario_id}-r{k}"})
        )
    return out


def scenario_row(sc: Scenario, cat: Category) -> dict[str, Any]:
    return {
        "scenario_id": sc.scenario_id,
        "category": cat.id,
        "category_name": cat.name,
        "group": cat.group,
        "content": sc.content,
        "media_form": sc.media_form,
        "detail": sc.detail,
        "risk_focus": sc.risk_focus,
        "source": sc.source,
        "scenario": json.dumps(sc.model_dump(), ensure_ascii=False, sort_keys=True),
    }


class ScenariosOffline(OfflineStrategy["Scenarios", ScenariosConfig]):
    """``sample_scenarios``: every compatible content x media-form pair once before repeats."""

    stage: Scenarios
    timed = False  # one item per shard: the category

    def run(self, batch: pa.Table, shard: ShardSpec | None) -> list[dict[str, Any]]:
        assert shard is not None, "scenarios are planned per category"
        item = {"category": shard.params["category"]}
        return self.isolated(item, partial(self.sample, item["category"]))

    def sample(self, category: str) -> list[dict[str, Any]]:
        c, cat = self.cfg, get_category(category)
        rng = rng_for(self.ctx.seed, self.stage.name, cat.id)
        scs = unique_ids(sample_scenarios(cat, rng, c.per_category))
        return [
            {**scenario_row(s, cat), "status": "ok", "backend": "offline", "model": "taxonomy"}
            for s in scs
        ]


class ScenariosModel(ModelStrategy["Scenarios", ScenariosConfig]):
    """One ``scenario_expansion`` request for the category, regenerated (with the reasons)
    while fewer than ``per_category`` usable proposals remain."""

    stage: Scenarios

    def ask(self, category: str) -> tuple[Category, ChatRequest, Validator]:
        c, cat = self.cfg, get_category(category)
        req = request(
            "scenarios",
            cat.id,
            "scenario_expansion",
            c.prompts_dir,
            response_model=ScenarioExpansion,
            **scenario_expansion_vars(cat, c.per_category),
        )

        def check(reply: ScenarioExpansion) -> list[str]:
            got, failures = scenarios_from_llm(cat, reply)
            if len({s.scenario_id for s in got}) >= c.per_category:
                return []
            return failures + [f"only {len(got)} usable scenarios, {c.per_category} asked"]

        return cat, req, check

    def scenarios(self, cat: Category, o: Outcome) -> list[dict[str, Any]]:
        failed = [{"scenario_id": f"{cat.id}-error", "category": cat.id, **o.trace()}]
        if not o.result.ok:
            return failed
        # Fewer usable proposals than asked after the last attempt: keep the usable ones.
        scs = unique_ids(scenarios_from_llm(cat, o.parsed())[0])[: self.cfg.per_category]
        if not scs:
            return failed
        trace = {**o.trace(), "status": "ok", "error": None, "retryable": False}
        out = [{**scenario_row(s, cat), **trace} for s in scs]
        set_usage(out, [o])
        return out

    def run(self, batch: pa.Table, shard: ShardSpec | None) -> list[dict[str, Any]]:
        assert shard is not None, "scenarios are planned per category"
        item = {"category": shard.params["category"]}
        out: list[dict[str, Any]] = []
        made = self.prepare(item, out, partial(self.ask, item["category"]))
        if made is None:
            return out
        cat, req, check = made
        o = self.call([(req, check)])[cat.id]
        return self.convert(item, o, partial(self.scenarios, cat, o))


class Scenarios(StrategyStage[ScenariosConfig]):
    name = "scenarios"
    config_model = ScenariosConfig
    version = "1"
    inputs = ()
    output_schema = SCHEMA
    key = "scenario_id"
    offline_strategy = ScenariosOffline
    model_strategy = ScenariosModel

    def stage_config(self) -> dict[str, Any]:
        return {
            **model_stage_config(self.cfg, TEMPLATES),
            "taxonomy": taxonomy_hash(),
        }

    def plan_sources(self) -> list[ShardSpec]:
        c = self.cfg
        if not c.enabled:
            return []
        cats = [x.id for x in load_taxonomy()]
        wanted = [x for x in cats if c.categories is None or x in c.categories]
        return [self.spec(cid, {}, [], {"category": cid}) for cid in wanted]

    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        return pa.table({})

    def error_row(self, row: dict[str, Any], message: str, retryable: bool) -> dict[str, Any]:
        """A category that failed: one row keyed '<category>-error'."""
        out = super().error_row(row, message, retryable)
        return {**out, "scenario_id": f"{row['category']}-error"}
