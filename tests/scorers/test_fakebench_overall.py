"""FakeBench's overall score against the paper's own rows (Tables 5-7, §4.1): the mean of the
automatic average and the judged average rescaled from 0-2 to 0-1, not the mean of all seven."""

from __future__ import annotations

import pytest

from forenset.benchmarks.fakebench.stages.fakebench_scores import overall_average

M = ("bleu1", "bleu2", "rouge_l", "similarity", "completeness", "preciseness", "relevance")
# (table, model): B-1, B-2, R-L, Sim., Aver.(auto), Comp., Prec., Rele., Aver.(judged), Overall
PAPER = {
    ("5", "GPT-4V"): (0.188, 0.092, 0.211, 0.635, 0.282, 1.872, 1.423, 1.891, 1.729, 0.573),
    ("5", "Otter"): (0.032, 0.007, 0.067, 0.287, 0.098, 0.952, 1.456, 1.492, 1.300, 0.374),
    ("6", "InstructBLIP"): (0.166, 0.065, 0.160, 0.458, 0.212, 1.828, 0.922, 1.546, 1.432, 0.464),
    ("6", "mPLUG-Owl2"): (0.109, 0.034, 0.160, 0.458, 0.190, 0.843, 0.500, 1.070, 0.804, 0.296),
    ("7", "GPT-4V"): (0.000, 0.000, 0.057, 0.300, 0.089, 1.981, 1.804, 1.971, 1.919, 0.524),
    ("7", "Claude3 Sonnet"): (0.000, 0.000, 0.050, 0.264, 0.079, 1.974, 1.923, 1.881, 1.926, 0.521),
    ("7", "InstructBLIP"): (0.001, 0.000, 0.001, 0.153, 0.039, 0.785, 1.606, 1.860, 1.417, 0.374),
}  # fmt: skip
# The printed values are rounded to 3 decimals; the sums of rounded values stay within 6e-4.
# (Table 5's Qwen-VL row is left out: its printed automatic Aver. 0.116 is not the mean of its
# own printed B-1/B-2/R-L/Sim., 0.123, so no rule reproduces it from those.)
ROUNDING = 6e-4


@pytest.mark.parametrize("key", list(PAPER), ids=lambda k: f"table{k[0]}-{k[1]}")
def test_overall_is_the_mean_of_the_automatic_and_the_rescaled_judged_average(key):
    vals = PAPER[key]
    auto, judged, overall, used = overall_average(dict(zip(M, vals[:4] + vals[5:8], strict=True)))
    assert auto == pytest.approx(vals[4], abs=ROUNDING)
    assert judged == pytest.approx(vals[8], abs=ROUNDING)
    assert overall == pytest.approx(vals[9], abs=ROUNDING)
    assert used.split(",") == list(M)


def test_by_hand_and_one_sided():
    row = dict(bleu1=0.2, bleu2=0.1, rouge_l=0.3, similarity=0.6,
               completeness=2.0, preciseness=1.0, relevance=1.5)  # fmt: skip
    # auto = 1.2 / 4 = 0.3; judged = 4.5 / 3 = 1.5 -> 0.75 on 0-1; overall = (0.3 + 0.75) / 2
    assert overall_average(row)[:3] == pytest.approx((0.3, 1.5, 0.525))
    # no judge: the automatic side alone, and the measures say so
    no_judge = {**row, "completeness": None, "preciseness": None, "relevance": None}
    assert overall_average(no_judge) == (pytest.approx(0.3), None, pytest.approx(0.3),
                                         "bleu1,bleu2,rouge_l,similarity")  # fmt: skip
    # no encoder: the automatic side averages the three overlap measures
    no_sim = {**row, "similarity": None}
    assert overall_average(no_sim)[0] == pytest.approx(0.2)
    assert overall_average({m: None for m in M}) == (None, None, None, None)


def test_average_scorers_give_overall_average_and_recompute_it_on_a_resample():
    """The registry's averages: the value is overall_average of the per-measure means; the
    statistic on the unresampled units gives the same number, and a side with no value (no
    judge) is left out, in the value and on every resample."""
    import numpy as np

    from forenset.benchmarks.common.scorers.types import Score, null_score
    from forenset.benchmarks.fakebench.scorers import (
        AUTO_AVERAGE,
        AVERAGE,
        JUDGED_AVERAGE,
        MEASURES,
    )

    rows = [
        (0.2, 0.1, 0.3, 0.6, 2, 1, 2),
        (0.4, 0.3, 0.5, 0.8, 1, 1, 0),
        (0.0, 0.0, 0.1, 0.5, 0, 2, 1),
    ]
    units = [
        {"label": "fake", "scores": {m: Score(m, float(v), "x", "offline") for m, v in zip(MEASURES, r, strict=True)}}
        for r in rows
    ]  # fmt: skip
    means = {m: sum(r[i] for r in rows) / 3 for i, m in enumerate(MEASURES)}
    want = overall_average(means)
    for k, scorer in enumerate((AUTO_AVERAGE, JUDGED_AVERAGE, AVERAGE)):
        got = scorer.score(units)
        assert got.value == pytest.approx(want[k]) and got.details["of"] == want[3]
        x = scorer.sample(units)
        assert scorer.statistic(x[None])[0] == pytest.approx(want[k])
    no_judge = [
        {"label": "fake", "scores": {**u["scores"], **{m: null_score(m, "no judge") for m in MEASURES[4:]}}}
        for u in units
    ]  # fmt: skip
    auto = AUTO_AVERAGE.score(no_judge).value
    assert AVERAGE.score(no_judge).value == pytest.approx(auto)
    assert JUDGED_AVERAGE.score(no_judge).value is None
    x = AVERAGE.sample(no_judge)
    idx = np.random.default_rng(0).integers(0, 3, size=(5, 3))
    assert np.all(np.isfinite(AVERAGE.statistic(x[idx])))  # the judged side never drags it NaN
