"""judgments: Edit-Check stage 2 — each judge's raw record from instruction + difference record.

Raw records only; the verdict is the ``verdicts`` stage's versioned rule, so a new threshold
or an extra judge needs no new judge calls for the others.

Offline: the strength-aware rule judge — ``edit_strength.measure`` weighs the change at the
target against what the instruction's kind needs and measures image-wide artefacts; the
judge's category and rationale come from those numbers (``measurements`` column). With a model pool: a text-only judge (``alignment_judge`` template)
reads the instruction, the difference record and the pixel-grounding flags; ``panel`` asks every
pool model, ``with_rule_judge`` keeps the rule judge's row as one more judge. Every model row
also carries the pixel measurements and the category they give (``pixel_category``);
``category_grounded`` is false where the model's category contradicts them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from functools import partial
from typing import Any

import pyarrow as pa
from pydantic import Field

from forenset.backends.edit_strength import StrengthRules, codec_explained, measure
from forenset.backends.llm import LLMSettings
from forenset.backends.llm.types import ChatRequest
from forenset.backends.rule_judge import RULE_VERSION, judge_measured, wants_codec
from forenset.images import decode_rgb
from forenset.schemas.judgments import CARRY, SCHEMA
from forenset.tasks.base import ShardSpec, dumps
from forenset.tasks.modelcall import ModelStageConfig, Outcome, model_stage_config, request
from forenset.tasks.strategy import ModelStrategy, OfflineStrategy, StrategyStage
from forenset.text.checks import validate_judgment
from forenset.text.models import AlignmentJudgment


class JudgmentsConfig(ModelStageConfig):
    """The judge(s). The offline rule judge's evidence thresholds are its 'prompt'.

    With ``llm`` set, ``panel: false`` gives each candidate one judge drawn from the pool by
    weight; ``panel: true`` asks every pool model (one raw row per candidate per judge), and
    ``with_rule_judge`` adds the offline rule judge's row next to the model judges'.
    """

    offtarget_dominance: float = Field(1.0, gt=0)  # off/in ratio above which off-target dominates
    # the area rule's (rules-v1) off-target limit; the strength rules use strength.offtarget_min
    max_offtarget_frac: float = Field(0.06, ge=0, le=1)
    panel: bool = False
    with_rule_judge: bool = False
    # strength-aware coverage: per change class thresholds, kind -> class, artefact limits
    strength: StrengthRules = Field(default_factory=StrengthRules)


TEMPLATES = ("alignment_judge",)


def evidence(differences_json: str | None, grounding_json: str | None) -> dict[str, Any]:
    """What the text judge sees: each difference marked grounded or not by the pixel map, and
    the sizeable pixel changes the extractor did not list."""
    diffs = json.loads(differences_json or "[]")
    g = json.loads(grounding_json or "{}")
    bad = set(g.get("hallucinated") or [])
    listed = [
        {
            k: d.get(k)
            for k in ("id", "region", "change_type", "description", "salience", "bbox")
            if d.get(k) is not None
        }
        | {"pixel_evidence": d.get("id") not in bad}
        for d in diffs
    ]
    return {"differences": listed, "unlisted_pixel_changes": g.get("missed") or []}


def agrees(category: str, pixel_category: str) -> bool:
    """Whether a judge's failure category is consistent with the pixel measurements' one
    ('ambiguous' on either side claims nothing)."""
    return category == pixel_category or "ambiguous" in (category, pixel_category)


class JudgmentsOffline(OfflineStrategy["Judgments", JudgmentsConfig]):
    """The strength-aware rule judge, row by row."""

    stage: Judgments

    def process_row(self, row: dict[str, Any], shard: ShardSpec | None) -> Iterable[dict[str, Any]]:
        m, v = self.stage.pixel_judgment(row)
        yield {
            **{k: row[k] for k in CARRY},
            **v,
            "measurements": dumps(m),
            "pixel_category": v["failure_category"],
            "category_grounded": True,
            "judge": f"offline/{RULE_VERSION}",
            "backend": "offline",
            "model": RULE_VERSION,
        }


class JudgmentsModel(ModelStrategy["Judgments", JudgmentsConfig]):
    """One text judge per candidate (or every pool model: ``panel``), plus the rule judge's row
    when ``with_rule_judge``; one round of calls per judge."""

    stage: Judgments

    def panels(self, settings: LLMSettings) -> list[tuple[str, LLMSettings]]:
        """(item-id suffix, settings) per judge call: the pool as drawn, or one per model."""
        if not self.cfg.panel:
            return [("", settings)]
        return [(f"|{s.label}", settings.model_copy(update={"pool": [s]})) for s in settings.pool]

    def request(self, row: dict[str, Any]) -> ChatRequest:
        ins = json.loads(row["instruction"] or "{}")
        return request(
            "judgments",
            row["candidate_id"],
            "alignment_judge",
            self.cfg.prompts_dir,
            response_model=AlignmentJudgment,
            instruction=ins.get("text", ""),
            family=ins.get("family", row.get("family") or ""),
            kind=ins.get("kind", row.get("kind") or ""),
            target=ins.get("target", ""),
            expected_change=ins.get("expected_change", ""),
            differences=evidence(row.get("differences"), row.get("grounding")),
        )

    def record(self, row: dict[str, Any], o: Outcome) -> dict[str, Any]:
        rec: dict[str, Any] = {**{k: row[k] for k in CARRY}, **o.trace()}
        rec["judge"] = f"{o.result.backend}/{o.result.model}"
        rec["rule_version"] = o.result.prompt_id
        if o.ok:
            rec.update(o.parsed().model_dump())
            m, px = self.stage.pixel_judgment(row)
            rec["measurements"] = dumps(m)
            rec["pixel_category"] = px["failure_category"]
            rec["category_grounded"] = agrees(rec["failure_category"], px["failure_category"])
            if not rec["category_grounded"]:
                rec["rationale"] = (
                    f"{rec['rationale']} [pixels: {px['failure_category']} — {px['rationale']}]"
                )
        return rec

    def run(self, batch: pa.Table, shard: ShardSpec | None) -> list[dict[str, Any]]:
        c = self.cfg
        out: list[dict[str, Any]] = []
        if c.with_rule_judge:
            out.extend(JudgmentsOffline(self.stage).run(batch, shard))
        asks: dict[str, tuple[dict[str, Any], ChatRequest]] = {}
        for row in batch.to_pylist():
            req = self.prepare(row, out, partial(self.request, row))
            if req is not None:
                asks[row["candidate_id"]] = (row, req)
        for suffix, settings in self.panels(c.llm):
            items = [
                (replace(req, item_id=cid + suffix), validate_judgment)
                for cid, (_, req) in asks.items()
            ]
            done = self.call(items, settings)
            for cid, (row, _) in asks.items():
                o = done[cid + suffix]
                out.extend(self.convert(row, o, partial(self.record, row, o)))
        return out


class Judgments(StrategyStage[JudgmentsConfig]):
    name = "judgments"
    config_model = JudgmentsConfig
    # 5: rules-v3 (per-kind aggregate change, "no visible change possible"); 6: rules-v4;
    # 7: rules-v5 (``located_ratio`` measured); 8: rules-v6 (the codec test, when on)
    # 9: rules-v7 (``relative_share`` measured for texture changes); 10: rules-v7 with
    # ``directional_change`` measured for blurs; 11: rules-v8 (the defaults chosen on all three
    # bench editors)
    version = "11"
    inputs = ("diffs",)
    input_columns = CARRY + ("grounding",)
    output_schema = SCHEMA
    key = "candidate_id"
    partition_by = ("generator",)
    offline_strategy = JudgmentsOffline
    model_strategy = JudgmentsModel

    def stage_config(self) -> dict[str, Any]:
        return model_stage_config(self.cfg, TEMPLATES)

    def pixel_judgment(self, row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The candidate's strength measurements and the rule judge's record from them."""
        real = decode_rgb(self.ctx.store.get_blob(row["source_blob"]))
        fake = decode_rgb(self.ctx.store.get_blob(row["blob"]))
        ins = json.loads(row["instruction"])
        return rule_record(real, fake, ins, self.cfg)


def rule_record(
    real: Any, fake: Any, instruction: dict[str, Any], cfg: JudgmentsConfig
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(measurements, rule judge record) of one pair: the stage's and the bench's path."""
    m = measure(real, fake, instruction, cfg.strength)
    rec = judge_measured(instruction, m, cfg.strength, offtarget_dominance=cfg.offtarget_dominance)
    if wants_codec(m, rec, cfg.strength):
        # a weak-change DISCARD: does a re-encode of the source explain it? (measured only here)
        m.update(codec_explained(real, fake, instruction, cfg.strength))
        rec = judge_measured(
            instruction, m, cfg.strength, offtarget_dominance=cfg.offtarget_dominance
        )
    return m, rec
