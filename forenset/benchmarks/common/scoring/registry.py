"""The metrics of each benchmark family, in display order: one line per built-in metric.

A line maps the metric's name to ``"module:attribute"`` of its scorer (imported on first use, so
listing names loads no model code). Adding a metric = its scorer module + one line here
(CONTRIBUTING, "Adding a metric"); :func:`register` adds one at run time (a plugin, a test).
"""

from __future__ import annotations

import importlib
from functools import cache

from forenset.benchmarks.common.scoring.protocol import GroupStatistic, Metric, Scorer
from forenset.errors import ForensetError

BUILTIN: dict[str, dict[str, str]] = {
    "evaluation": {  # XPlainVerse Table 5, in the paper's order after the detection scores
        "f1": "forenset.benchmarks.evaluation.scorers.table5:F1_SCORE",
        "accuracy": "forenset.benchmarks.evaluation.scorers.table5:ACCURACY",
        "entity_score": "forenset.benchmarks.evaluation.scorers.table5:ENTITY_SCORE",
        "evidence_score": "forenset.benchmarks.evaluation.scorers.table5:EVIDENCE_SCORE",
        "bertscore_f1": "forenset.benchmarks.evaluation.scorers.table5:BERTSCORE_F1",
        "sle": "forenset.benchmarks.evaluation.scorers.table5:SLE",
    },
    "fakebench": {  # FakeBench Tables 4-8: FakeClass accuracy, then Tables 5-7's columns
        "accuracy": "forenset.benchmarks.fakebench.scorers:ACCURACY",
        "bleu1": "forenset.benchmarks.fakebench.scorers:BLEU1",
        "bleu2": "forenset.benchmarks.fakebench.scorers:BLEU2",
        "rouge_l": "forenset.benchmarks.fakebench.scorers:ROUGE_L",
        "similarity": "forenset.benchmarks.fakebench.scorers:SIMILARITY",
        "auto_average": "forenset.benchmarks.fakebench.scorers:AUTO_AVERAGE",
        "completeness": "forenset.benchmarks.fakebench.scorers:COMPLETENESS",
        "preciseness": "forenset.benchmarks.fakebench.scorers:PRECISENESS",
        "relevance": "forenset.benchmarks.fakebench.scorers:RELEVANCE",
        "judged_average": "forenset.benchmarks.fakebench.scorers:JUDGED_AVERAGE",
        "average": "forenset.benchmarks.fakebench.scorers:AVERAGE",
    },
    "reward": {  # XAIGID-RewardBench: Tables 1-2, Table 4, Fig. 3, agreement, Tables 3/5
        "accuracy": "forenset.benchmarks.reward.scorers.tables:ACCURACY",
        "acc4": "forenset.benchmarks.reward.scorers.tables:ACC4",
        "acc2": "forenset.benchmarks.reward.scorers.tables:ACC2",
        "share_First": "forenset.benchmarks.reward.scorers.tables:SHARE_FIRST",
        "share_Second": "forenset.benchmarks.reward.scorers.tables:SHARE_SECOND",
        "share_Tie": "forenset.benchmarks.reward.scorers.tables:SHARE_TIE",
        "share_BothBad": "forenset.benchmarks.reward.scorers.tables:SHARE_BOTHBAD",
        "position_bias": "forenset.benchmarks.reward.scorers.tables:POSITION_BIAS",
        "swap_consistency": "forenset.benchmarks.reward.scorers.tables:SWAP_CONSISTENCY",
        "agreement": "forenset.benchmarks.reward.scorers.tables:AGREEMENT",
        "rank": "forenset.benchmarks.reward.scorers.arena:RANK",
        "elo": "forenset.benchmarks.reward.scorers.arena:ELO",
        "elo_std": "forenset.benchmarks.reward.scorers.arena:ELO_STD",
        "bt": "forenset.benchmarks.reward.scorers.arena:BT",
        "games": "forenset.benchmarks.reward.scorers.arena:GAMES",
        "wins": "forenset.benchmarks.reward.scorers.arena:WINS",
        "losses": "forenset.benchmarks.reward.scorers.arena:LOSSES",
        "ties": "forenset.benchmarks.reward.scorers.arena:TIES",
        "both_bad": "forenset.benchmarks.reward.scorers.arena:BOTH_BAD",
        "win_rate": "forenset.benchmarks.reward.scorers.arena:WIN_RATE",
    },
    "public": {  # public benchmarks (FakeClue, LOKI, So-Fake-OOD, AIGI-Holmes): per task type
        "accuracy": "forenset.benchmarks.public.scorers:ACCURACY",
        "f1": "forenset.benchmarks.public.scorers:F1",
        "real_accuracy": "forenset.benchmarks.public.scorers:REAL_ACCURACY",
        "fake_accuracy": "forenset.benchmarks.public.scorers:FAKE_ACCURACY",
        "mc_accuracy": "forenset.benchmarks.public.scorers:MC_ACCURACY",
        "bleu1": "forenset.benchmarks.public.scorers:BLEU1",
        "rouge_l": "forenset.benchmarks.public.scorers:ROUGE_L",
        "bertscore_f1": "forenset.benchmarks.public.scorers:BERTSCORE_F1",
        "similarity": "forenset.benchmarks.public.scorers:SIMILARITY",
    },
    "safeimg": {  # SafeIMG Table 2 (eq. 12), real-image accuracy, Table 3, App. A (eq. 13)
        "detection_rate": "forenset.benchmarks.safeimg.scorers:DETECTION_RATE",
        "real_accuracy": "forenset.benchmarks.safeimg.scorers:REAL_ACCURACY",
        "human_covered": "forenset.benchmarks.safeimg.scorers:HUMAN_COVERED",
        "ai_supported": "forenset.benchmarks.safeimg.scorers:AI_SUPPORTED",
        "hit_rate": "forenset.benchmarks.safeimg.scorers:HIT_RATE",
        "delta": "forenset.benchmarks.safeimg.scorers:DELTA",
    },
}
_REGISTERED: dict[str, dict[str, Metric]] = {}


class UnknownMetric(ForensetError, KeyError):
    """A metric name that no family lists."""


@cache
def _load(target: str) -> Metric:
    module, _, attr = target.partition(":")
    scorer: Metric = getattr(importlib.import_module(module), attr)
    return scorer


def register(family: str, scorer: Metric) -> Metric:
    """Add ``scorer`` to ``family`` after its built-ins (replacing one of the same name)."""
    if not isinstance(scorer, Scorer | GroupStatistic):
        raise TypeError(f"{scorer!r} implements neither the Scorer nor the GroupStatistic protocol")
    _REGISTERED.setdefault(family, {})[scorer.name] = scorer
    return scorer


def unregister(family: str, name: str) -> None:
    _REGISTERED.get(family, {}).pop(name, None)


def families() -> list[str]:
    return sorted(set(BUILTIN) | set(_REGISTERED))


def metric_names(family: str) -> list[str]:
    return list(dict.fromkeys([*BUILTIN.get(family, {}), *_REGISTERED.get(family, {})]))


def scorer(family: str, name: str) -> Metric:
    if name in _REGISTERED.get(family, {}):
        return _REGISTERED[family][name]
    target = BUILTIN.get(family, {}).get(name)
    if target is None:
        raise UnknownMetric(f"{family} has no metric {name!r}; known: {metric_names(family)}")
    got = _load(target)
    if getattr(got, "name", None) != name:
        raise TypeError(f"{target} is named {getattr(got, 'name', None)!r}, registered as {name!r}")
    return got


def scorers(family: str) -> tuple[Metric, ...]:
    """Every metric of ``family`` in display order (built-ins first)."""
    return tuple(scorer(family, n) for n in metric_names(family))
