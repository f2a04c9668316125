"""BLEU-1/2 and ROUGE-L of a generated text against a golden one.

Explanation benchmarks score generated explanations with BLEU-1, BLEU-2 (Papineni et al.) and
ROUGE-L (Lin) against golden texts (a family's scorers cite their paper's use of them). Both
come from the libraries the community reports with, so the numbers are comparable:
``sacrebleu`` (sentence BLEU with its ``13a`` tokenizer, n-gram orders up to 1 or 2, brevity
penalty, *no smoothing*: a text without a matching bigram has BLEU-2 = 0) and ``rouge-score``
(ROUGE-L F-measure, its default lower-casing tokenizer, no stemming). Values are in [0, 1]
(sacrebleu's 0–100 divided by 100). An empty prediction scores 0 on every metric: it earns no
credit.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

from forenset.benchmarks.common.scorers.types import Score

BACKEND = "algorithmic"
METRICS = ("bleu1", "bleu2", "rouge_l")


@cache
def _bleu(order: int) -> Any:
    from sacrebleu.metrics import BLEU

    # sacrebleu logs a recommendation of effective_order on every sentence score; the paper's
    # sentence BLEU is the plain one, so the advice is silenced, not followed
    logging.getLogger("sacrebleu").setLevel(logging.ERROR)
    return BLEU(max_ngram_order=order, smooth_method="none", effective_order=False)


@cache
def _rouge() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


def library_label() -> str:
    """The libraries and versions behind the numbers (the rows' ``model``)."""
    from importlib.metadata import version

    return f"sacrebleu-{version('sacrebleu')}+rouge-score-{version('rouge-score')}"


def bleu(prediction: str, reference: str, order: int) -> float:
    """Sentence BLEU-``order`` in [0, 1], unsmoothed, with the brevity penalty."""
    if not prediction.strip() or not reference.strip():
        return 0.0
    return _bleu(order).sentence_score(prediction, [reference]).score / 100.0


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure in [0, 1]."""
    if not prediction.strip() or not reference.strip():
        return 0.0
    return float(_rouge().score(reference, prediction)["rougeL"].fmeasure)


def overlap_scores(prediction: str, reference: str) -> dict[str, Score]:
    """BLEU-1, BLEU-2 and ROUGE-L of one (prediction, golden) pair."""
    label = library_label()
    values = {
        "bleu1": bleu(prediction, reference, 1),
        "bleu2": bleu(prediction, reference, 2),
        "rouge_l": rouge_l(prediction, reference),
    }
    return {m: Score(m, v, label, BACKEND) for m, v in values.items()}
