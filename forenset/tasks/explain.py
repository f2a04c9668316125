"""explanations: complex + simple for kept fakes, authenticity for reals, validated and regenerated.

Offline: templates filled from the measured evidence. With a model pool: ``explain_complex``
(fake + real image, instruction and difference record as references), then ``explain_simple``
conditioned on the accepted complex text, and ``explain_authenticity`` (real image). Every
reply passes the text package's checks and this stage's own (words, entity, no leakage);
failures are regenerated up to ``max_attempts`` times, then become error rows with the reasons.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from pydantic import Field

from forenset.backends.offline_explain import (
    authenticity,
    complex_fake,
    entity_names,
    leaks,
    mentioned,
    simple_fake,
)
from forenset.images import decode_rgb
from forenset.schemas.explanations import SCHEMA
from forenset.tasks.base import RowStage, ShardSpec, StageRowError
from forenset.tasks.modelcall import (
    ModelStageConfig,
    Outcome,
    call_validated,
    model_stage_config,
    request,
)
from forenset.tasks.splits import SplitPartitioned
from forenset.text.checks import (
    validate_authenticity_explanation,
    validate_complex_explanation,
    validate_simple_explanation,
)
from forenset.text.models import AuthenticityExplanation, ComplexExplanation, SimpleExplanation


class ExplanationsConfig(ModelStageConfig):
    min_words: int = Field(12, ge=1)
    max_words: dict[str, int] = {"complex": 160, "simple": 45, "authenticity": 140}


TEMPLATES = ("explain_complex", "explain_simple", "explain_authenticity")


class Explanations(SplitPartitioned, RowStage):
    name = "explanations"
    config_model = ExplanationsConfig
    version = "2"
    input_columns = (
        "sample_id",
        "label",
        "split",
        "blob",
        "source_blob",
        "caption",
        "instruction",
        "differences",
        "entities",
    )
    output_schema = SCHEMA
    key = "explanation_id"

    def stage_config(self) -> dict[str, Any]:
        return model_stage_config(self.cfg, TEMPLATES)

    def validate(self, kind: str, text: str, entities: list[str]) -> list[str]:
        c = self.cfg
        problems = []
        n = len(text.split())
        if n < c.min_words or n > c.max_words[kind]:
            problems.append(f"{n} words, outside {c.min_words}–{c.max_words[kind]}")
        if not mentioned(text, entities):
            problems.append("mentions no concrete entity")
        if leaks(text):
            problems.append("refers to the hidden references")
        return problems

    def generate(self, kind: str, make, entities: list[str], row: dict[str, Any]) -> dict[str, Any]:
        problems: list[str] = []
        tries = self.cfg.max_attempts
        for attempt in range(tries):
            text = make(attempt)
            problems = self.validate(kind, text, entities)
            if not problems:
                return {
                    "explanation_id": f"{row['sample_id']}-{kind}",
                    "sample_id": row["sample_id"],
                    "label": row["label"],
                    "split": row["split"],
                    "kind": kind,
                    "text": text,
                    "entities_mentioned": mentioned(text, entities),
                    "n_words": len(text.split()),
                    "attempts": attempt + 1,
                    "backend": "offline",
                    "model": "templates-v1",
                }
        raise StageRowError(
            f"{kind} explanation failed validation after {tries} attempts: {'; '.join(problems)}"
        )

    def process_row(self, row: dict[str, Any], shard: ShardSpec | None):
        if row["label"] == "real":
            img = decode_rgb(self.ctx.store.get_blob(row["blob"]))
            ents = entity_names(row.get("entities"))
            yield self.generate(
                "authenticity", lambda a: authenticity(img, row["caption"], ents, a), ents, row
            )
            return
        ins = json.loads(row["instruction"])
        if "target" not in ins:
            raise StageRowError(
                "offline explanations need an edit record; text-to-image samples are explained "
                "by a VLM (set explanations.llm)"
            )
        diffs = json.loads(row["differences"] or "[]")
        ents = [ins["target"]]
        cx = self.generate("complex", lambda a: complex_fake(ins, diffs, a), ents, row)
        yield cx
        yield self.generate("simple", lambda a: simple_fake(ins, cx["text"], a), ents, row)

    # -- model path ------------------------------------------------------------
    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        c = self.cfg
        if c.llm is None:
            return super().process(batch, shard)
        rows = batch.to_pylist()
        first, meta, out = [], {}, []
        for row in rows:
            sid = row["sample_id"]
            try:
                self.ctx.store.get_blob(row["blob"])
            except Exception as e:  # noqa: BLE001 - an unreadable image is this row's error
                kind = "authenticity" if row["label"] == "real" else "complex"
                err = self.error_row(row, f"cannot read image blob: {e}", True)
                out.append({**err, "explanation_id": f"{sid}-{kind}", "kind": kind})
                continue
            if row["label"] == "real":
                ents = entity_names(row.get("entities"))
                meta[f"{sid}-authenticity"] = (row, "authenticity", ents)
                req = request(
                    "explanations",
                    f"{sid}-authenticity",
                    "explain_authenticity",
                    c.prompts_dir,
                    images=[self.ctx.store.get_blob(row["blob"])],
                    response_model=AuthenticityExplanation,
                    caption=row["caption"] or "",
                    min_words=str(c.min_words),
                    max_words=str(c.max_words["authenticity"]),
                )
                first.append((req, self._checker("authenticity", ents)))
                continue
            ins = json.loads(row["instruction"] or "{}")
            ents = [ins.get("target", "")]
            meta[f"{sid}-complex"] = (row, "complex", ents)
            images = [self.ctx.store.get_blob(row["blob"])]
            if row.get("source_blob"):
                images.append(self.ctx.store.get_blob(row["source_blob"]))
            req = request(
                "explanations",
                f"{sid}-complex",
                "explain_complex",
                c.prompts_dir,
                images=images,
                response_model=ComplexExplanation,
                instruction=ins.get("text", ""),
                differences=json.loads(row["differences"] or "[]"),
                min_words=str(c.min_words),
                max_words=str(c.max_words["complex"]),
            )
            first.append((req, self._checker("complex", ents)))
        done = call_validated(self.ctx, self.name, c.llm, first, c.max_attempts)
        second = []
        for item_id, (row, kind, ents) in list(meta.items()):
            o = done[item_id]
            out.append(self._model_row(row, kind, ents, o))
            if kind != "complex":
                continue
            sid = row["sample_id"]
            if not o.ok:
                out.append(
                    {
                        **self._model_row(row, "simple", ents, o),
                        "error": "not attempted: the complex explanation it builds on failed",
                    }
                )
                continue
            meta[f"{sid}-simple"] = (row, "simple", ents)
            req = request(
                "explanations",
                f"{sid}-simple",
                "explain_simple",
                c.prompts_dir,
                images=[self.ctx.store.get_blob(row["blob"])],
                response_model=SimpleExplanation,
                complex_explanation=o.parsed().explanation,
                max_words=str(c.max_words["simple"]),
            )
            second.append((req, self._checker("simple", ents)))
        done2 = call_validated(self.ctx, self.name, c.llm, second, c.max_attempts)
        for item_id, o in done2.items():
            row, kind, ents = meta[item_id]
            out.append(self._model_row(row, kind, ents, o))
        return self.to_table(out)

    def _checker(self, kind: str, entities: list[str]):
        c = self.cfg
        lo, hi = c.min_words, c.max_words[kind]

        def check(reply) -> list[str]:
            if kind == "complex":
                problems = validate_complex_explanation(reply, lo, hi)
            elif kind == "simple":
                problems = validate_simple_explanation(reply, hi)
            else:
                problems = validate_authenticity_explanation(reply, lo, hi)
            return problems + self.validate(kind, reply.explanation, entities)

        return check

    def _model_row(
        self, row: dict[str, Any], kind: str, entities: list[str], o: Outcome
    ) -> dict[str, Any]:
        text = o.parsed().explanation if o.ok else None
        return {
            "explanation_id": f"{row['sample_id']}-{kind}",
            "sample_id": row["sample_id"],
            "label": row["label"],
            "split": row["split"],
            "kind": kind,
            "text": text,
            "entities_mentioned": mentioned(text, entities) if text else None,
            "n_words": len(text.split()) if text else None,
            "attempts": o.attempts,
            **o.trace(),
            "stage_version": self.version,
        }
