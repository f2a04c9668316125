"""Edit-Check outside a build: one (real, candidate, instruction) through the offline
judgments -> verdicts rule. A helper module (not a stage), so neither stage imports the other."""

from __future__ import annotations

from typing import Any

from forenset.backends.rule_judge import aggregate
from forenset.tasks.judgments import JudgmentsConfig, rule_record
from forenset.tasks.verdicts import VerdictsConfig


def offline_check(
    real: Any,
    fake: Any,
    instruction: dict[str, Any],
    judgments: Any = None,
    verdicts: VerdictsConfig | None = None,
) -> dict[str, Any]:
    """One (real, candidate, instruction) through the offline judgments -> verdicts rule as
    the stages run them (default configurations unless given): the bench's and CI floor's path.
    (The offline judge decides from pixel measurements, not from the diffs stage's regions.)"""
    j, v = judgments or JudgmentsConfig(), verdicts or VerdictsConfig()
    m, rec = rule_record(real, fake, instruction, j)
    agg = aggregate(
        [rec],
        combine=v.combine,
        keep_score=v.keep_score,
        borderline_score=v.borderline_score,
        hard_discard=v.hard_discard,
        decide=v.decide,
    )
    return {**rec, **agg, "judge_verdict": rec["verdict"], "measurements": m}
