from dataclasses import dataclass

import pyarrow as pa

from forenset.schemas.common import F64, I64, S, stage_schema


@dataclass(frozen=True)
class ExplanationMetric:
    """One explanation metric of the evaluation family: its column in ``eval_scores`` (plus
    ``_model``, ``_backend``, ``_reason``), its header in ``forenset eval`` and the report, and
    the tracks it scores. The stage, this schema and the report all read this one list."""

    name: str
    header: str
    tracks: tuple[str, ...]


# In the paper's order (XPlainVerse Table 5).
EXPLANATION_METRICS: tuple[ExplanationMetric, ...] = (
    ExplanationMetric("entity_score", "EntityScore", ("complex",)),
    ExplanationMetric("evidence_score", "EvidenceScore", ("complex",)),
    ExplanationMetric("bertscore_f1", "BERTScore-F1", ("complex", "simple")),
    ExplanationMetric("sle", "SLE", ("simple",)),  # normalised (eq. 7-8)
)


def _metric(name: str) -> list[pa.Field]:
    """A model-based metric: its value, the model and backend that computed it, or the reason
    it is null (never a number without the model behind it)."""
    return [
        pa.field(name, F64),
        pa.field(f"{name}_model", S),
        pa.field(f"{name}_backend", S),
        pa.field(f"{name}_reason", S),
    ]


SCHEMA = stage_schema(
    pa.field("score_id", S, nullable=False),  # "<detector>/<track>/<eval_set>/<group_kind>=<group>"
    pa.field("detector", S),
    pa.field("track", S),  # complex | simple
    pa.field("eval_set", S),  # id | ood
    # all | generator | generator_family | variant | perturbation | perturbation_severity | severity
    pa.field("group_kind", S),
    # "all", a generator name, a family (reals group as "real"), "1x", "noise", "noise:0.5", "0.5"
    pa.field("group", S),
    # detection (fake = positive; an unparseable answer is wrong)
    pa.field("n", I64),
    pa.field("n_unparsed", I64),
    pa.field("tp", I64),
    pa.field("fp", I64),
    pa.field("fn", I64),
    pa.field("tn", I64),
    pa.field("f1", F64),
    pa.field("f1_reason", S),  # null F1: the group holds no fake item
    pa.field("accuracy", F64),
    pa.field("detection_model", S),  # the library that computed F1 / accuracy
    # explanations: means over the group's items that have a reference explanation
    pa.field("n_explained", I64),  # items scored against a reference
    pa.field("n_no_reference", I64),  # items whose sample has no reference explanation
    *(f for m in EXPLANATION_METRICS for f in _metric(m.name)),
)
