"""EntityScore and EvidenceScore of an explanation against a reference (seed paper §4, App. 15).

The metric has two steps, both done by one evaluator (App. 15.0.0.1–15.0.0.2):

1. *Extraction*: each explanation, independently, becomes a structure G = (E, V) of diagnostic
   entities E and entity-linked evidence claims V (:class:`ExtractedExplanation`, the paper's
   JSON schema with ``diagnostic_entities`` and ``evidence_claims``).
2. *Directional coverage*: the precision pass judges every item of the prediction's structure
   G^p against the full reference text y^r; the recall pass judges every item of G^r against
   the prediction text y^p (:class:`CoverageJudgment`). Eq. 1–4 average the 0/1 ``cover``
   indicators over the source set; eq. 5–6 take the harmonic mean, which is 0 when precision
   and recall are both 0.

Two evaluators fill those steps: :class:`ModelEntityEvidenceEvaluator` (an ``llm:`` pool through
``run_chat``, as the paper does with Qwen3.5-4B) and :class:`OfflineEntityEvidenceEvaluator`
(deterministic phrase matching, ``backend="offline"``, ``model="phrase-match-v1"``). Both return
the same :class:`EntityEvidenceResult`, computed by :func:`combine`.

Rules the paper leaves open (its Table 18 of edge cases is not in our copy), fixed here:

* an empty source set gives that side 0 (no diagnostic content earns no credit), so a
  prediction with no extractable entity scores 0 even against an empty reference;
* a source item the judge leaves out of its reply counts as not covered (cover = 0), and is
  counted in ``details["unjudged"]``; judged ids that are not in the source are ignored;
* any failed model call makes that pair's scores null, with the call's error as the reason.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from forenset.backends.llm.types import ChatRequest, ChatResult, LLMSettings
from forenset.benchmarks.common.scorers import phrase_match
from forenset.benchmarks.common.scorers.types import Score, null_score

if TYPE_CHECKING:
    from forenset.backends.llm.cache import ResponseCache

EXTRACT_TEMPLATE = "explanation_extractor"
COVER_TEMPLATE = "explanation_evaluator"
DEFAULT_STAGE = "explanation_scores"


# -- the evaluator's JSON schema (App. 15.0.0.1) ---------------------------------------------
class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class DiagnosticEntity(_Model):
    entity_id: str = Field(description="E1, E2, ...")
    name: str = Field(description="The image region, subject or part used as evidence.")


class EvidenceClaim(_Model):
    claim_id: str = Field(description="C1, C2, ...")
    entity_id: str | None = Field(description="Id of the entity this claim is about, or null.")
    claim: str = Field(description="A compact, checkable visual observation about the entity.")


def _unique(ids: list[str], what: str) -> None:
    seen: set[str] = set()
    dup = sorted({i for i in ids if i in seen or seen.add(i)})  # type: ignore[func-returns-value]
    if dup:
        raise ValueError(f"{what} ids repeat: {dup}")


class ExtractedExplanation(_Model):
    """G = (E, V): the paper's extraction output schema."""

    diagnostic_entities: list[DiagnosticEntity] = Field(default_factory=list)
    evidence_claims: list[EvidenceClaim] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> ExtractedExplanation:
        _unique([e.entity_id for e in self.diagnostic_entities], "entity")
        _unique([c.claim_id for c in self.evidence_claims], "claim")
        known = {e.entity_id for e in self.diagnostic_entities}
        dangling = sorted(
            c.claim_id for c in self.evidence_claims if c.entity_id and c.entity_id not in known
        )
        if dangling:
            raise ValueError(f"claims {dangling} name an entity_id that is not extracted")
        return self


class EntityCoverage(_Model):
    entity_id: str
    supported: bool


class ClaimCoverage(_Model):
    claim_id: str
    supported: bool


class CoverageJudgment(_Model):
    """One directional pass: cover(z | G, y) for every source entity and claim (App. 15.0.0.2)."""

    entities: list[EntityCoverage] = Field(default_factory=list)
    claims: list[ClaimCoverage] = Field(default_factory=list)

    @model_validator(mode="after")
    def _no_repeats(self) -> CoverageJudgment:
        _unique([e.entity_id for e in self.entities], "judged entity")
        _unique([c.claim_id for c in self.claims], "judged claim")
        return self


# -- scoring (eq. 1-6) ---------------------------------------------------------------------
def harmonic_mean(precision: float, recall: float) -> float:
    """Eq. 5–6; 0 when both terms are 0 (App. 15.0.0.2), and so 0 whenever either is 0."""
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def coverage_rate(source_ids: Sequence[str], supported: dict[str, bool]) -> tuple[float, int]:
    """Eq. 1–4: mean of cover over the source set; (rate, number of items left unjudged).

    An empty source set gives 0; an item missing from ``supported`` counts as not covered.
    """
    if not source_ids:
        return 0.0, 0
    covered = sum(bool(supported.get(i, False)) for i in source_ids)
    unjudged = sum(i not in supported for i in source_ids)
    return covered / len(source_ids), unjudged


@dataclass(frozen=True)
class EntityEvidenceResult:
    """EntityScore and EvidenceScore of one pair, plus the structures and judgments behind them."""

    item_id: str
    entity: Score
    evidence: Score
    trace: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {"item_id": self.item_id, **self.entity.row(), **self.evidence.row()}


def combine(
    item_id: str,
    prediction: ExtractedExplanation,
    reference: ExtractedExplanation,
    precision_pass: CoverageJudgment,
    recall_pass: CoverageJudgment,
    *,
    model: str,
    backend: str,
) -> EntityEvidenceResult:
    """Scores from the two structures and the two directional judgments (eq. 1–6)."""
    pe = {e.entity_id: e.supported for e in precision_pass.entities}
    pc = {c.claim_id: c.supported for c in precision_pass.claims}
    re_ = {e.entity_id: e.supported for e in recall_pass.entities}
    rc = {c.claim_id: c.supported for c in recall_pass.claims}
    ent_p, u1 = coverage_rate([e.entity_id for e in prediction.diagnostic_entities], pe)
    ent_r, u2 = coverage_rate([e.entity_id for e in reference.diagnostic_entities], re_)
    ev_p, u3 = coverage_rate([c.claim_id for c in prediction.evidence_claims], pc)
    ev_r, u4 = coverage_rate([c.claim_id for c in reference.evidence_claims], rc)
    entity = Score(
        "entity_score",
        harmonic_mean(ent_p, ent_r),
        model,
        backend,
        details={
            "precision": ent_p,
            "recall": ent_r,
            "n_pred": len(prediction.diagnostic_entities),
            "n_ref": len(reference.diagnostic_entities),
            "unjudged": u1 + u2,
        },
    )
    evidence = Score(
        "evidence_score",
        harmonic_mean(ev_p, ev_r),
        model,
        backend,
        details={
            "precision": ev_p,
            "recall": ev_r,
            "n_pred": len(prediction.evidence_claims),
            "n_ref": len(reference.evidence_claims),
            "unjudged": u3 + u4,
        },
    )
    trace = {
        "prediction_structure": prediction.model_dump(),
        "reference_structure": reference.model_dump(),
        "precision_pass": precision_pass.model_dump(),
        "recall_pass": recall_pass.model_dump(),
    }
    return EntityEvidenceResult(item_id, entity, evidence, trace)


def failed(item_id: str, reason: str, *, model: str, backend: str) -> EntityEvidenceResult:
    """Both scores null for one pair, with the reason (a failed call, a missing evaluator)."""
    return EntityEvidenceResult(
        item_id,
        null_score("entity_score", reason, model=model, backend=backend),
        null_score("evidence_score", reason, model=model, backend=backend),
    )


@dataclass(frozen=True)
class ExplanationPair:
    """A predicted explanation and its reference, under the id the scores are reported by."""

    item_id: str
    prediction: str
    reference: str


# -- the model evaluator (an llm: pool) ---------------------------------------------------
def _empty(g: ExtractedExplanation) -> bool:
    return not g.diagnostic_entities and not g.evidence_claims


def _schema(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema(), sort_keys=True)


def extraction_request(
    item_id: str, explanation: str, *, prompts_root: str | Path | None = None
) -> ChatRequest:
    """Step 1 for one explanation (App. 15.0.0.1); the reply parses as ExtractedExplanation."""
    return ChatRequest.from_template(
        EXTRACT_TEMPLATE,
        item_id,
        EXTRACT_TEMPLATE,
        prompts_root,
        response_model=ExtractedExplanation,
        explanation=explanation.strip(),
        schema=_schema(ExtractedExplanation),
    )


def coverage_request(
    item_id: str,
    source: ExtractedExplanation,
    target: str,
    *,
    prompts_root: str | Path | None = None,
) -> ChatRequest:
    """One directional pass (App. 15.0.0.2): source structure G against target text y."""
    return ChatRequest.from_template(
        COVER_TEMPLATE,
        item_id,
        COVER_TEMPLATE,
        prompts_root,
        response_model=CoverageJudgment,
        structure=json.dumps(source.model_dump(), ensure_ascii=False, indent=1),
        target=target.strip(),
        schema=_schema(CoverageJudgment),
    )


class ModelEntityEvidenceEvaluator:
    """EntityScore / EvidenceScore with an LLM evaluator from an ``llm:`` pool (App. 15).

    All four calls of one pair (two extractions, two coverage passes) go to the same pool
    model, drawn by (build seed, stage, pair id): the paper uses one evaluator for both steps.
    Give a ``cache`` to extract a reference shared by many predictions only once.
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        build_seed: int = 0,
        stage: str = DEFAULT_STAGE,
        cache: ResponseCache | None = None,
        prompts_root: str | Path | None = None,
    ) -> None:
        self.settings = settings
        self.build_seed = build_seed
        self.stage = stage
        self.cache = cache
        self.prompts_root = prompts_root

    def _run(self, requests: list[ChatRequest], settings: LLMSettings) -> list[ChatResult]:
        from forenset.backends.llm.engine import run_chat  # the SDKs load only when used

        return run_chat(
            requests, settings, build_seed=self.build_seed, stage=self.stage, cache=self.cache
        )

    def evaluate(self, pairs: Sequence[ExplanationPair]) -> list[EntityEvidenceResult]:
        """Scores in input order; a pair whose calls fail gets null scores with the error."""
        from forenset.backends.llm.pool import choose_model

        ids = [p.item_id for p in pairs]
        if len(set(ids)) != len(ids):
            raise ValueError("pair item_ids must be unique: requests and scores are keyed by them")
        groups: dict[int, list[int]] = {}
        specs = [
            choose_model(self.settings.pool, self.build_seed, self.stage, p.item_id) for p in pairs
        ]
        for i, spec in enumerate(specs):
            groups.setdefault(self.settings.pool.index(spec), []).append(i)
        out: list[EntityEvidenceResult | None] = [None] * len(pairs)
        for k, idx in groups.items():
            one = self.settings.model_copy(update={"pool": [self.settings.pool[k]]})
            for i, res in zip(idx, self._evaluate_group([pairs[i] for i in idx], one), strict=True):
                out[i] = res
        return out  # type: ignore[return-value]

    def _evaluate_group(
        self, pairs: list[ExplanationPair], settings: LLMSettings
    ) -> list[EntityEvidenceResult]:
        spec = settings.pool[0]
        root = self.prompts_root
        ext = self._run(
            [
                r
                for p in pairs
                for r in (
                    extraction_request(
                        f"{p.item_id}#extract-prediction", p.prediction, prompts_root=root
                    ),
                    extraction_request(
                        f"{p.item_id}#extract-reference", p.reference, prompts_root=root
                    ),
                )
            ],
            settings,
        )
        results: list[EntityEvidenceResult | None] = [None] * len(pairs)
        cover_reqs: list[ChatRequest] = []
        structures: dict[int, tuple[ExtractedExplanation, ExtractedExplanation]] = {}
        for j, p in enumerate(pairs):
            rp, rr = ext[2 * j], ext[2 * j + 1]
            bad = next((r for r in (rp, rr) if not r.ok), None)
            if bad is not None:
                results[j] = failed(
                    p.item_id,
                    f"extraction failed: {bad.error}",
                    model=bad.model or spec.model,
                    backend=bad.backend or spec.backend,
                )
                continue
            gp, gr = rp.parsed, rr.parsed
            assert isinstance(gp, ExtractedExplanation) and isinstance(gr, ExtractedExplanation)
            structures[j] = (gp, gr)
            for tag, source, target in (
                ("precision", gp, p.reference),
                ("recall", gr, p.prediction),
            ):
                if _empty(source):  # nothing to judge: no call, coverage 0 by combine's rule
                    continue
                cover_reqs.append(
                    coverage_request(f"{p.item_id}#cover-{tag}", source, target, prompts_root=root)
                )
        done = dict(
            zip((r.item_id for r in cover_reqs), self._run(cover_reqs, settings), strict=True)
        )
        for j, (gp, gr) in structures.items():
            pid = pairs[j].item_id
            cp, cr = done.get(f"{pid}#cover-precision"), done.get(f"{pid}#cover-recall")
            bad = next((r for r in (cp, cr) if r is not None and not r.ok), None)
            if bad is not None:
                results[j] = failed(
                    pid,
                    f"coverage judgment failed: {bad.error}",
                    model=bad.model or spec.model,
                    backend=bad.backend or spec.backend,
                )
                continue
            jp = CoverageJudgment() if cp is None else cp.parsed
            jr = CoverageJudgment() if cr is None else cr.parsed
            assert isinstance(jp, CoverageJudgment) and isinstance(jr, CoverageJudgment)
            results[j] = combine(pid, gp, gr, jp, jr, model=spec.model, backend=spec.backend)
        return results  # type: ignore[return-value]


# -- the offline evaluator (deterministic phrase matching) ---------------------------------
def offline_extraction(text: str) -> ExtractedExplanation:
    """Step 1 without a model: phrase_match's entities and claims in the paper's schema."""
    ex = phrase_match.extract(text)
    return ExtractedExplanation(
        diagnostic_entities=[
            DiagnosticEntity(entity_id=f"E{i + 1}", name=e.name) for i, e in enumerate(ex.entities)
        ],
        evidence_claims=[
            EvidenceClaim(
                claim_id=f"C{i + 1}",
                entity_id=None if c.entity is None else f"E{c.entity + 1}",
                claim=c.text,
            )
            for i, c in enumerate(ex.claims)
        ],
    )


def offline_coverage(source: ExtractedExplanation, target: str) -> CoverageJudgment:
    """Step 2 without a model: cover(z | G, y) by phrase_match's rules, from the structure alone."""
    names = {e.entity_id: e.name for e in source.diagnostic_entities}
    return CoverageJudgment(
        entities=[
            EntityCoverage(
                entity_id=e.entity_id, supported=phrase_match.entity_supported(e.name, target)
            )
            for e in source.diagnostic_entities
        ],
        claims=[
            ClaimCoverage(
                claim_id=c.claim_id,
                supported=phrase_match.claim_supported(
                    names.get(c.entity_id or ""), c.claim, target
                ),
            )
            for c in source.evidence_claims
        ],
    )


class OfflineEntityEvidenceEvaluator:
    """EntityScore / EvidenceScore with deterministic phrase extraction and matching.

    A baseline that runs anywhere and never calls a model: noun-phrase runs and visual-cue
    words stand in for the evaluator's judgment (:mod:`forenset.benchmarks.common.scorers.phrase_match`).
    Its numbers are labelled ``backend="offline"``, ``model="phrase-match-v1"`` and are not
    comparable with a model evaluator's.
    """

    backend = "offline"
    model = phrase_match.MODEL

    def evaluate(self, pairs: Sequence[ExplanationPair]) -> list[EntityEvidenceResult]:
        """Scores in input order, with the same rules as the model evaluator (:func:`combine`)."""
        out = []
        for p in pairs:
            gp, gr = offline_extraction(p.prediction), offline_extraction(p.reference)
            out.append(
                combine(
                    p.item_id,
                    gp,
                    gr,
                    offline_coverage(gp, p.reference),
                    offline_coverage(gr, p.prediction),
                    model=self.model,
                    backend=self.backend,
                )
            )
        return out
