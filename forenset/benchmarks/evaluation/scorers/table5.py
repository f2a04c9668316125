"""XPlainVerse Table 5 as scorers: detection F1 and accuracy (§5 "Evaluation Protocol", fake =
positive; an unparseable answer by the rule of ``common.scorers.classification``) and the
explanation metrics (§4, App. 15) per track: complex = EntityScore, EvidenceScore,
BERTScore-F1; simple = BERTScore-F1, SLE (normalised, eq. 7-8).

The model-based item scores are computed by the ``eval_scores`` stage in batches (one model
load per shard) and handed to these scorers in each item's ``scores`` mapping; a group value
is the mean of its items' ok scores. Items of a group without a reference explanation are
left out and counted in the row's details (``n_no_reference``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from forenset.benchmarks.common.scorers.types import Score
from forenset.benchmarks.common.scoring.detection import F1, Accuracy
from forenset.benchmarks.common.scoring.protocol import Item, ItemMean

NO_REFERENCE = "no item of this group has a reference explanation"


def item_score(name: str):  # noqa: ANN201 - a small closure factory
    """The item's precomputed score of metric ``name`` (None: the item has none)."""

    def value(item: Item) -> Score | None:
        return (item.get("scores") or {}).get(name)

    return value


@dataclass(frozen=True)
class ExplanationMean(ItemMean):
    """The mean of the group's item scores against reference explanations."""

    def score(self, items: Sequence[Item]) -> Score:
        s = super().score(items)
        missing = sum(i.get("reference") is None for i in items)
        return replace(s, details={**s.details, "n_no_reference": missing})


def _explanation(name: str, header: str, tracks: tuple[str, ...]) -> ExplanationMean:
    return ExplanationMean(
        name,
        header,
        item_score(name),
        needs=("explanation", "reference"),
        scope={"track": tracks},
        empty_reason=NO_REFERENCE,
    )


F1_SCORE = F1("f1", "F1 %")
ACCURACY = Accuracy("accuracy", "accuracy %")
ENTITY_SCORE = _explanation("entity_score", "EntityScore", ("complex",))
EVIDENCE_SCORE = _explanation("evidence_score", "EvidenceScore", ("complex",))
BERTSCORE_F1 = _explanation("bertscore_f1", "BERTScore-F1", ("complex", "simple"))
SLE = _explanation("sle", "SLE", ("simple",))  # normalised (eq. 7-8)
