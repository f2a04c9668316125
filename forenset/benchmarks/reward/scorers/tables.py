"""The reward benchmark's per-item metrics as registry scorers (``scoring.BUILTIN["reward"]``).

The ``reward_scores`` stage builds each group's items and scores every registered metric whose
``scope`` names the group's ``table``; a metric whose ``needs`` no item of a group carries is
not scored there (swap consistency: only a judge asked both ways). Items per table:

* ``policy_accuracy`` (Tables 1-2): one per response, ``verdict`` and ``label`` (a missing
  verdict is wrong);
* ``judge_accuracy`` (Table 4): one per labelled triplet, the judge's ``choice`` and the
  ground-truth ``label`` (§3.5: Acc(4) over T, Acc(2) over T2 = First / Second labels);
* ``position_bias`` (Fig. 3): one per choice of a rater, ``choice``; a judge's items also
  carry ``swap`` (1.0 when its two answers agree once mapped to one order, None when the
  triplet was not asked both ways);
* ``agreement``: one per triplet, its agreeing annotator ``pairs`` and ``agree`` count (the
  ``4-way`` group over all pairs, ``clear`` over the pairs where both chose First or Second).
"""

from __future__ import annotations

from forenset.benchmarks.common.scoring import Item, ItemMean, Ratio
from forenset.benchmarks.reward.scorers.metrics import CHOICES, CLEAR

METRICS_MODEL = "reward-metrics-v1"
NO_ITEMS = "no items to score"


def _table(*names: str) -> dict[str, tuple[str, ...]]:
    return {"table": names}


def hit(item: Item) -> float:
    """1.0 when the verdict is the label (Tables 1-2)."""
    return float(item["verdict"] == item["label"])


def judge_hit(item: Item) -> float:
    """1.0 when the judge chose the ground-truth label (Acc(4))."""
    return float(item["choice"] == item["label"])


def judge_hit_clear(item: Item) -> float | None:
    """Acc(2)'s item: only a triplet whose label is a clear winner counts."""
    return judge_hit(item) if item["label"] in CLEAR else None


ACCURACY = ItemMean(
    "accuracy", "acc", hit, needs=("verdict", "label"), scope=_table("policy_accuracy"),
    percent=True, model=METRICS_MODEL, empty_reason=NO_ITEMS, classes=("real", "fake"),
)  # fmt: skip
ACC4 = ItemMean(
    "acc4", "4-way acc", judge_hit, needs=("choice", "label"), scope=_table("judge_accuracy"),
    percent=True, model=METRICS_MODEL, empty_reason=NO_ITEMS,
)  # fmt: skip
ACC2 = ItemMean(
    "acc2", "2-way acc", judge_hit_clear, needs=("choice", "label"),
    scope=_table("judge_accuracy"), percent=True, model=METRICS_MODEL, empty_reason=NO_ITEMS,
)  # fmt: skip


def share_of(choice: str) -> Ratio:
    """The share of a rater's choices that are ``choice`` (Fig. 3)."""

    def columns(item: Item) -> tuple[float, float] | None:
        c = item["choice"]
        return (float(c == choice), 1.0) if c in CHOICES else None

    return Ratio(
        f"share_{choice}", f"{choice} share", columns, needs=("choice",),
        scope=_table("position_bias"), percent=True, model=METRICS_MODEL,
        empty_reason="no choices",
    )  # fmt: skip


SHARE_FIRST, SHARE_SECOND, SHARE_TIE, SHARE_BOTHBAD = (share_of(c) for c in CHOICES)


def first_of_clear(item: Item) -> tuple[float, float] | None:
    """(First, First or Second) of one choice: the position bias' columns."""
    c = item["choice"]
    return (float(c == "First"), float(c in CLEAR)) if c in CHOICES else None


POSITION_BIAS = Ratio(
    "position_bias", "position bias", first_of_clear, shift=0.5, needs=("choice",),
    scope=_table("position_bias"), model=METRICS_MODEL,
    empty_reason="no clear (First / Second) choices",
)  # fmt: skip
SWAP_CONSISTENCY = ItemMean(
    "swap_consistency", "swap consistency", lambda i: i["swap"], needs=("swap",),
    scope=_table("position_bias"), model=METRICS_MODEL, empty_reason=NO_ITEMS,
)  # fmt: skip


def agreeing_pairs(item: Item) -> tuple[float, float]:
    return (float(item["agree"]), float(item["pairs"]))


AGREEMENT = Ratio(
    "agreement", "agreement", agreeing_pairs, needs=("agree", "pairs"),
    scope=_table("agreement"), percent=True, model=METRICS_MODEL,
    empty_reason="no pair of annotators on one triplet",
)  # fmt: skip
