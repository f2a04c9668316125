"""explanations: complex + simple for kept fakes, authenticity for reals, validated and regenerated."""

from __future__ import annotations

import json
from typing import Any

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
from forenset.tasks.splits import SplitPartitioned

MAX_ATTEMPTS = 3


class Explanations(SplitPartitioned, RowStage):
    name = "explanations"
    version = "1"
    input_columns = (
        "sample_id",
        "label",
        "split",
        "blob",
        "caption",
        "instruction",
        "differences",
        "entities",
    )
    output_schema = SCHEMA
    key = "explanation_id"

    def stage_config(self) -> dict[str, Any]:
        return self.ctx.config.explanations.model_dump(mode="json")

    def validate(self, kind: str, text: str, entities: list[str]) -> list[str]:
        c = self.ctx.config.explanations
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
        for attempt in range(MAX_ATTEMPTS):
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
            f"{kind} explanation failed validation after {MAX_ATTEMPTS} attempts: {'; '.join(problems)}"
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
        diffs = json.loads(row["differences"] or "[]")
        ents = [ins["target"]]
        cx = self.generate("complex", lambda a: complex_fake(ins, diffs, a), ents, row)
        yield cx
        yield self.generate("simple", lambda a: simple_fake(ins, cx["text"], a), ents, row)
