"""The public benchmarks' metrics as scorers: the registry's ``public`` family.

A unit is one item of a group: ``{"label", "verdict"}`` for a judgement (verdict None:
unreadable or unanswered, counted wrong), ``{"hit"}`` for a multiple choice, ``{"scores":
{metric: Score}}`` for an explanation. Each scorer is scoped to its task (``scope``), so one
call of ``score_rows`` per group gives exactly that task's measures:

* judgement: ``accuracy``, ``f1`` (fake = positive; scikit-learn, the evaluation family's
  rule), ``real_accuracy`` and ``fake_accuracy`` (per class);
* multiple_choice: ``mc_accuracy``;
* explanation: ``bleu1``, ``rouge_l`` (sacrebleu / rouge-score, as FakeBench reports them),
  ``bertscore_f1`` and ``similarity`` (a local encoder each; null with the reason without one).
"""

from __future__ import annotations

from forenset.benchmarks.common.scorers.types import Score
from forenset.benchmarks.common.scoring.detection import F1 as _F1
from forenset.benchmarks.common.scoring.detection import Accuracy as _Accuracy
from forenset.benchmarks.common.scoring.protocol import Item, ItemMean

JUDGEMENT = {"task": ("judgement",)}
CHOICE = {"task": ("multiple_choice",)}
EXPLANATION = {"task": ("explanation",)}
TEXT_METRICS = ("bleu1", "rouge_l", "bertscore_f1", "similarity")


def _class_hit(label: str):  # noqa: ANN202 - a small closure factory
    def value(unit: Item) -> float | None:
        if unit.get("label") != label:
            return None
        return float(unit.get("verdict") == label)

    return value


def _hit(unit: Item) -> float | None:
    return unit.get("hit")


def _score(name: str):  # noqa: ANN202 - a small closure factory
    def value(unit: Item) -> Score | None:
        return (unit.get("scores") or {}).get(name)

    return value


ACCURACY = _Accuracy("accuracy", "Acc", pred="verdict", scope=JUDGEMENT)
F1 = _F1("f1", "F1", pred="verdict", scope=JUDGEMENT)
REAL_ACCURACY = ItemMean("real_accuracy", "Acc real", _class_hit("real"), scope=JUDGEMENT,
                         percent=True, empty_reason="no real image in this group")  # fmt: skip
FAKE_ACCURACY = ItemMean("fake_accuracy", "Acc fake", _class_hit("fake"), scope=JUDGEMENT,
                         percent=True, empty_reason="no fake image in this group")  # fmt: skip
MC_ACCURACY = ItemMean("mc_accuracy", "Acc MC", _hit, scope=CHOICE, percent=True)
BLEU1 = ItemMean("bleu1", "B.-1", _score("bleu1"), scope=EXPLANATION)
ROUGE_L = ItemMean("rouge_l", "R.-L", _score("rouge_l"), scope=EXPLANATION)
BERTSCORE_F1 = ItemMean("bertscore_f1", "BERTScore", _score("bertscore_f1"), scope=EXPLANATION)
SIMILARITY = ItemMean("similarity", "Sim.", _score("similarity"), scope=EXPLANATION)
