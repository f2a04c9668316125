"""explanations: complex + simple for kept fakes, authenticity for reals, validated and regenerated.

Offline: templates filled from the measured evidence (a text-to-image fake, which has no
difference record, from statistics measured on its own pixels). With a model pool: ``explain_complex``
(fake + real image, instruction and difference record as references), then ``explain_simple``
conditioned on the accepted complex text, and ``explain_authenticity`` (real image). Every
reply passes the text package's checks and this stage's own (words, entity, no leakage);
failures are regenerated up to ``max_attempts`` times, then become error rows with the reasons.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import pyarrow as pa
from pydantic import Field

from forenset.backends.llm.types import ChatRequest, LLMSettings
from forenset.backends.offline_explain import (
    authenticity,
    complex_fake,
    complex_generated,
    entity_names,
    generated_evidence,
    leaks,
    mentioned,
    simple_fake,
    simple_generated,
    subject,
)
from forenset.backends.offline_vision import regions
from forenset.errors import ConfigurationError
from forenset.images import decode_rgb
from forenset.schemas.explanations import SCHEMA
from forenset.tasks.base import ContractError, ShardSpec, StageRowError, describe, writable
from forenset.tasks.modelcall import (
    ModelStageConfig,
    Outcome,
    Validator,
    model_stage_config,
    request,
    template_hashes,
)
from forenset.tasks.shared import SplitPartitioned
from forenset.tasks.strategy import ModelStrategy, OfflineStrategy, StrategyStage
from forenset.text.checks import (
    repeated_ngrams,
    validate_authenticity_explanation,
    validate_complex_explanation,
    validate_simple_explanation,
)
from forenset.text.models import AuthenticityExplanation, ComplexExplanation, SimpleExplanation


class ExplanationsConfig(ModelStageConfig):
    """``llm``: the pool for fakes (complex, then simple). ``authenticity_llm``: the pool for
    real photos' authenticity explanations (XPlainVerse uses its own models for them); unset,
    reals use ``llm``. A kind whose pool is unset is explained offline, from measurements."""

    authenticity_llm: LLMSettings | None = None
    min_words: int = Field(12, ge=1)
    max_words: dict[str, int] = {"complex": 160, "simple": 45, "authenticity": 140}


TEMPLATES = ("explain_complex", "explain_simple", "explain_authenticity")


def keyed(row: dict[str, Any], kind: str) -> dict[str, Any]:
    """The input row with the explanation's id, so its error row is keyed like its row."""
    return {**row, "explanation_id": f"{row['sample_id']}-{kind}", "kind": kind}


class ExplanationsOffline(OfflineStrategy["Explanations", ExplanationsConfig]):
    """Templates filled from the measured evidence, redrawn while validation fails."""

    stage: Explanations

    def generate(
        self, kind: str, make: Callable[[int], str], entities: list[str], row: dict[str, Any]
    ) -> dict[str, Any]:
        problems: list[str] = []
        tries = self.cfg.max_attempts
        for attempt in range(tries):
            text = make(attempt)
            problems = self.stage.validate(kind, text, entities)
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
                    "model": "templates-v3",
                }
        raise StageRowError(
            f"{kind} explanation failed validation after {tries} attempts: {'; '.join(problems)}"
        )

    def process_row(self, row: dict[str, Any], shard: ShardSpec | None) -> Iterable[dict[str, Any]]:
        """One row per kind, each its own try: a simple text failing validation keeps the
        complex one, and an error row is keyed by its explanation id, as on the model path."""
        kinds = ("authenticity",) if row["label"] == "real" else ("complex", "simple")
        try:
            made = self.makers(row)
        except Exception as e:  # noqa: BLE001 - isolate()'s rule, applied to each kind's row
            return [self.kind_error(row, kind, e) for kind in kinds]
        out = []
        for kind in kinds:
            make, ents = made[kind]
            try:
                out.append(self.generate(kind, make, ents, row))
            except Exception as e:  # noqa: BLE001
                out.append(self.kind_error(row, kind, e))
        return out

    def makers(self, row: dict[str, Any]) -> dict[str, tuple[Callable[[int], str], list[str]]]:
        """Each kind's text maker (attempt -> text) and the entities it must mention."""
        if row["label"] == "real":
            img = decode_rgb(self.ctx.store.get_blob(row["blob"]))
            ents = entity_names(row.get("entities"))
            return {"authenticity": (lambda a: authenticity(img, row["caption"], ents, a), ents)}
        ins = json.loads(row["instruction"] or "{}")
        if row.get("differences") is None:  # text-to-image: no source photo, no differences
            return self.generated(row)
        diffs = json.loads(row["differences"] or "[]")
        # the target when the instruction names one (else the largest measured region); the
        # edit kind is never used: the text states what was measured
        ents = [subject(ins, [d for d in diffs if d.get("change_type") != "artifact"])[2]]
        return {
            "complex": (lambda a: complex_fake(ins, diffs, a), ents),
            "simple": (lambda a: simple_fake(ins, diffs, a), ents),
        }

    def generated(self, row: dict[str, Any]) -> dict[str, tuple[Callable[[int], str], list[str]]]:
        """A text-to-image fake: the statistics measured on its pixels (noise per cell, the
        residual spectrum's periodic peak, sharpness, saturation), about its largest measured
        region (the entity the text must name); the prompt is never used."""
        img = decode_rgb(self.ctx.store.get_blob(row["blob"]))
        ev = generated_evidence(img)
        found = regions(img, n=1)
        ent = found[0]["name"] if found else "image"
        return {
            "complex": (lambda a: complex_generated(ev, ent, a), [ent]),
            "simple": (lambda a: simple_generated(ev, ent, a), [ent]),
        }

    def kind_error(self, row: dict[str, Any], kind: str, e: Exception) -> dict[str, Any]:
        """RowStage's error rule (a StageRowError as explained, anything else retryable) for
        one kind's row; configuration and contract errors still fail the shard."""
        if isinstance(e, (ConfigurationError, ContractError)):
            raise e
        key = keyed(row, kind)
        if isinstance(e, StageRowError):
            return self.stage.error_row(key, writable(str(e)), e.retryable)
        return self.stage.error_row(key, describe(e), True)


class ExplanationsModel(ModelStrategy["Explanations", ExplanationsConfig]):
    """Round 1: ``explain_complex`` (fake + real image) or ``explain_authenticity`` (real
    image); round 2: ``explain_simple`` conditioned on each accepted complex text."""

    stage: Explanations

    def blob(self, key: str) -> bytes:
        try:
            return self.ctx.store.get_blob(key)
        except Exception as e:  # noqa: BLE001 - an unreadable image is this row's error
            raise StageRowError(f"cannot read image blob: {e}", retryable=True) from e

    def first(self, row: dict[str, Any], kind: str) -> tuple[list[str], ChatRequest]:
        """The entities to mention and the request of a sample's first explanation."""
        c = self.cfg
        png = self.blob(row["blob"])
        item_id = f"{row['sample_id']}-{kind}"
        if kind == "authenticity":
            req = request(
                "explanations",
                item_id,
                "explain_authenticity",
                c.prompts_dir,
                images=[png],
                response_model=AuthenticityExplanation,
                caption=row["caption"] or "",
                min_words=str(c.min_words),
                max_words=str(c.max_words["authenticity"]),
            )
            return entity_names(row.get("entities")), req
        ins = json.loads(row["instruction"] or "{}")
        images = [png]
        if row.get("source_blob"):
            images.append(self.blob(row["source_blob"]))
        req = request(
            "explanations",
            item_id,
            "explain_complex",
            c.prompts_dir,
            images=images,
            response_model=ComplexExplanation,
            instruction=ins.get("text", ""),
            differences=json.loads(row["differences"] or "[]"),
            min_words=str(c.min_words),
            max_words=str(c.max_words["complex"]),
        )
        return [ins.get("target", "")], req

    def simple(self, row: dict[str, Any], complex_text: str) -> ChatRequest:
        c = self.cfg
        return request(
            "explanations",
            f"{row['sample_id']}-simple",
            "explain_simple",
            c.prompts_dir,
            images=[self.blob(row["blob"])],
            response_model=SimpleExplanation,
            complex_explanation=complex_text,
            max_words=str(c.max_words["simple"]),
        )

    def checker(self, kind: str, entities: list[str]) -> Validator:
        c = self.cfg
        lo, hi = c.min_words, c.max_words[kind]

        def check(reply: Any) -> list[str]:
            if kind == "complex":
                problems = validate_complex_explanation(reply, lo, hi)
            elif kind == "simple":
                problems = validate_simple_explanation(reply, hi)
            else:
                problems = validate_authenticity_explanation(reply, lo, hi)
            return problems + self.stage.validate(kind, reply.explanation, entities)

        return check

    def record(
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
        }

    def pool(self, kind: str) -> LLMSettings | None:
        """The model pool of one explanation kind (None: explained offline)."""
        c = self.cfg
        return (c.authenticity_llm or c.llm) if kind == "authenticity" else c.llm

    def run(self, batch: pa.Table, shard: ShardSpec | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        meta: dict[str, tuple[dict[str, Any], str, list[str]]] = {}
        first: dict[str, list[tuple[ChatRequest, Validator]]] = {"complex": [], "authenticity": []}
        offline = []
        for row in batch.to_pylist():
            kind = "authenticity" if row["label"] == "real" else "complex"
            if self.pool(kind) is None:
                offline.append(row)
                continue
            made = self.prepare(keyed(row, kind), out, partial(self.first, row, kind))
            if made is not None:
                ents, req = made
                meta[req.item_id] = (row, kind, ents)
                first[kind].append((req, self.checker(kind, ents)))
        if offline:
            sub = pa.Table.from_pylist(offline, schema=batch.schema)
            out.extend(ExplanationsOffline(self.stage).run(sub, shard))
        done: dict[str, Outcome] = {}
        for kind, items in first.items():
            if items:
                done.update(self.call(items, self.pool(kind)))
        second = []
        for item_id, (row, kind, ents) in list(meta.items()):
            o = done[item_id]
            rows = self.convert(keyed(row, kind), o, partial(self.record, row, kind, ents, o))
            out.extend(rows)
            if kind != "complex":
                continue
            if rows[0]["status"] != "ok":
                out.append(
                    {
                        **rows[0],
                        "explanation_id": f"{row['sample_id']}-simple",
                        "kind": "simple",
                        "error": "not attempted: the complex explanation it builds on failed",
                    }
                )
                continue
            simple = partial(self.simple, row, rows[0]["text"])
            simple_req = self.prepare(keyed(row, "simple"), out, simple)
            if simple_req is not None:
                meta[simple_req.item_id] = (row, "simple", ents)
                second.append((simple_req, self.checker("simple", ents)))
        for item_id, o in (self.call(second, self.cfg.llm) if second else {}).items():
            row, kind, ents = meta[item_id]
            out.extend(self.convert(keyed(row, kind), o, partial(self.record, row, kind, ents, o)))
        return out


class Explanations(SplitPartitioned[ExplanationsConfig], StrategyStage[ExplanationsConfig]):
    name = "explanations"
    config_model = ExplanationsConfig
    # 3: one try per kind offline (a failed simple text keeps the complex one); 4: text-to-image
    # fakes explained offline from statistics measured on their pixels (were error rows); 5: no
    # repeated 4-word phrase (the validator rejects one; templates state each place once)
    version = "5"
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
    offline_strategy = ExplanationsOffline
    model_strategy = ExplanationsModel

    def stage_config(self) -> dict[str, Any]:
        d = model_stage_config(self.cfg, TEMPLATES)
        if self.cfg.authenticity_llm is not None and "templates" not in d:
            d["templates"] = template_hashes(TEMPLATES, self.cfg.prompts_dir)
        return d

    def strategy(self) -> Any:
        """The model path when either pool is set; a kind without a pool is explained offline."""
        c = self.cfg
        if c.llm is None and c.authenticity_llm is None:
            return self.offline_strategy(self)
        return self.model_strategy(self)

    def validate(self, kind: str, text: str, entities: list[str]) -> list[str]:
        """This stage's own checks of an explanation (both strategies): length, a concrete
        entity, no leak of the hidden references, no repeated word 4-gram."""
        c = self.cfg
        problems = []
        n = len(text.split())
        if n < c.min_words or n > c.max_words[kind]:
            problems.append(f"{n} words, outside {c.min_words}–{c.max_words[kind]}")
        if not mentioned(text, entities):
            problems.append("mentions no concrete entity")
        if leaks(text):
            problems.append("refers to the hidden references")
        again = repeated_ngrams(text)
        if again:
            problems.append(f"repeats a phrase: {'; '.join(repr(g) for g in again[:3])}")
        return problems
