"""The scoring infrastructure: bootstrap intervals, degenerate-set caveats, long rows, the pivot
and the metric registry (forenset.benchmarks.common.scoring)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import f1_score

from forenset.benchmarks.common import scoring
from forenset.benchmarks.common.scoring import (
    GroupStatistic,
    IntervalsConfig,
    ItemMean,
    Scorer,
    bootstrap,
    degenerate,
    pivot,
    score_rows,
)
from forenset.benchmarks.common.scoring.detection import F1, Accuracy
from forenset.benchmarks.common.scoring.intervals import NO_FAKES, NO_REALS
from forenset.schemas.scores import SCORE_NAMES, long_score_schema

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _mean(x):
    return x[..., 0].mean(-1)


def test_bootstrap_is_seeded_and_matches_the_binomial_spread():
    x = np.array([1.0] * 50 + [0.0] * 50)
    a = bootstrap(x, _mean, resamples=2000, level=0.95, seed=[1, 2])
    assert a == bootstrap(x, _mean, resamples=2000, level=0.95, seed=[1, 2])
    y = np.random.default_rng(0).normal(size=50)  # continuous: another seed, another interval
    b = bootstrap(y, _mean, resamples=200, level=0.95, seed=[1, 2])
    assert b == bootstrap(y, _mean, resamples=200, level=0.95, seed=[1, 2])
    assert b != bootstrap(y, _mean, resamples=200, level=0.95, seed=[1, 3])
    half = 1.96 * np.sqrt(0.25 / 100)  # normal approximation of the mean's 95 % interval
    assert a[0] == pytest.approx(0.5 - half, abs=0.03)
    assert a[1] == pytest.approx(0.5 + half, abs=0.03)
    narrow = bootstrap(x, _mean, resamples=2000, level=0.5, seed=[1, 2])
    assert a[0] < narrow[0] < narrow[1] < a[1]


def test_bootstrap_without_data_or_resamples_has_no_interval():
    assert bootstrap(np.array([1.0]), _mean, resamples=100, level=0.95, seed=0) is None
    assert bootstrap(np.array([1.0, 0.0]), _mean, resamples=0, level=0.95, seed=0) is None
    nan = bootstrap(np.array([1.0, 0.0]), lambda x: np.full(len(x), np.nan), resamples=10,
                    level=0.95, seed=0)  # fmt: skip
    assert nan is None


def test_f1_and_accuracy_statistics_equal_scikit_learn_on_resamples():
    rng = np.random.default_rng(0)
    x = np.stack([rng.integers(0, 2, 40), rng.integers(0, 2, 40)], axis=1).astype(float)
    idx = rng.integers(0, 40, size=(25, 40))
    f1 = F1("f1", "F1").statistic(x[idx])
    acc = Accuracy("accuracy", "acc").statistic(x[idx])
    for b in range(25):
        t, p = x[idx[b], 0], x[idx[b], 1]
        assert f1[b] == pytest.approx(f1_score(t, p, zero_division=0))
        assert acc[b] == pytest.approx((t == p).mean())
    only_reals = np.zeros((1, 5, 2))
    assert np.isnan(F1("f1", "F1").statistic(only_reals)[0])  # undefined, left out


def test_degenerate_sets():
    assert degenerate(20, 10, ["fake"] * 20, ("real", "fake")) == NO_REALS
    assert degenerate(20, 10, ["real"] * 20, ("real", "fake")) == NO_FAKES
    assert degenerate(5, 10, ["real", "fake"] * 2 + ["fake"], ("real", "fake")) == (
        "n = 5 is below the minimum of 10 items"
    )
    assert degenerate(5, 10) == "n = 5 is below the minimum of 10 items"
    assert degenerate(10, 10, ["real"] * 5 + ["fake"] * 5, ("real", "fake")) is None


def _items(n_fake_right, n_fake_wrong, n_real_right, n_real_wrong, n_unparsed=0):
    return (
        [{"label": "fake", "answer": "fake"}] * n_fake_right
        + [{"label": "fake", "answer": "real"}] * n_fake_wrong
        + [{"label": "real", "answer": "real"}] * n_real_right
        + [{"label": "real", "answer": "fake"}] * n_real_wrong
        + [{"label": "fake", "answer": None}] * n_unparsed
    )


def test_score_rows_by_hand():
    items = _items(8, 2, 6, 4, n_unparsed=2)  # tp 8, fn 4 (2 unparsed), tn 6, fp 4
    rows = score_rows({"set": "id"}, "id", items, [F1("f1", "F1"), Accuracy("accuracy", "A")],
                      IntervalsConfig(resamples=500), seed=3)  # fmt: skip
    f1, acc = rows
    assert f1["score_id"] == "id/f1" and f1["set"] == "id" and f1["n"] == 22
    assert f1["value"] == pytest.approx(2 * 8 / (2 * 8 + 4 + 4))
    assert acc["value"] == pytest.approx(14 / 22)
    for r in rows:
        assert r["ci_low"] <= r["value"] <= r["ci_high"] and r["caveat"] is None
        assert '"n_unparsed": 2' in r["details"] and '"tp": 8' in r["details"]
    again = score_rows({"set": "id"}, "id", items, [F1("f1", "F1")],
                       IntervalsConfig(resamples=500), seed=3)  # fmt: skip
    assert again[0]["ci_low"] == f1["ci_low"]  # seeded by the build seed and the score_id
    assert f1["seed"] == 3
    other = score_rows({"set": "id"}, "id", items, [F1("f1", "F1")],
                       IntervalsConfig(resamples=500, seed=4), seed=3)  # fmt: skip
    assert other[0]["seed"] == 4  # intervals.seed overrides the build seed
    assert (other[0]["ci_low"], other[0]["ci_high"]) != (f1["ci_low"], f1["ci_high"])


def test_score_rows_flags_one_class_sets_and_small_sets():
    fakes = _items(15, 5, 0, 0)
    f1, acc = score_rows({}, "g", fakes, [F1("f1", "F1"), Accuracy("accuracy", "A")],
                         IntervalsConfig(), seed=0)  # fmt: skip
    assert f1["caveat"] == NO_REALS and acc["caveat"] == NO_REALS
    assert f1["value"] == pytest.approx(30 / 35) and acc["value"] == 0.75
    reals = score_rows({}, "g", _items(0, 0, 12, 0), [F1("f1", "F1")], IntervalsConfig(), seed=0)
    assert reals[0]["value"] is None and reals[0]["reason"].startswith("no fake item")
    assert reals[0]["caveat"] == NO_FAKES and reals[0]["ci_reason"] == "no value"
    small = score_rows({}, "g", _items(2, 0, 2, 0), [F1("f1", "F1")], IntervalsConfig(), seed=0)
    assert small[0]["caveat"] == "n = 4 is below the minimum of 10 items"
    off = score_rows({}, "g", _items(8, 2, 6, 4), [F1("f1", "F1")],
                     IntervalsConfig(resamples=0), seed=0)  # fmt: skip
    assert off[0]["ci_low"] is None and off[0]["ci_reason"] == "intervals.resamples is 0"


def test_item_mean_scope_and_null_reasons():
    m = ItemMean("len", "len", lambda i: i.get("v"), scope={"track": ("simple",)})
    items = [{"v": 1.0}, {"v": 3.0}, {"v": None}]
    assert score_rows({"track": "complex"}, "c", items, [m], IntervalsConfig(), 0) == []
    (row,) = score_rows({"track": "simple"}, "s", items, [m], IntervalsConfig(min_n=2), 0)
    assert (row["value"], row["n"], row["caveat"], row["model"]) == (2.0, 2, None, "forenset")
    (none,) = score_rows({"track": "simple"}, "s", [{"v": None}], [m], IntervalsConfig(), 0)
    assert none["value"] is None and none["reason"] == m.empty_reason and none["n"] == 0


def test_pivot_renders_values_intervals_caveats_and_notes():
    f1, acc = F1("f1", "F1 %"), Accuracy("accuracy", "acc %")
    m = ItemMean("len", "len", lambda i: i["v"])
    rows = [
        {"d": "a", "metric": "f1", "value": 0.5, "n": 20, "ci_low": 0.25, "ci_high": 0.75},
        {"d": "a", "metric": "len", "value": 2.0, "n": 12, "ci_low": 1.0, "ci_high": 3.0},
        {"d": "b", "metric": "f1", "value": 1.0, "n": 20, "caveat": NO_REALS},
        {"d": "b", "metric": "len", "value": None, "n": 0, "reason": "no model"},
    ]
    p = pivot(rows, ["d"], [f1, acc, m], index_headers=["detector"])
    assert p.headers == ["detector", "n", "F1 %", "len"]  # accuracy has no row: no column
    assert p.rows[0] == ["a", "20", "50.00 [25.00, 75.00]", "2.000 [1.000, 3.000] n=12"]
    assert p.rows[1] == ["b", "20", f"not meaningful ({NO_REALS})", scoring.DASH]
    assert p.notes == {("len", "no model"): ["b"]}


def test_long_schema_columns():
    s = long_score_schema("detector", "track")
    assert s.names[:3] == ["score_id", "detector", "track"]
    assert tuple(s.names[3 : 3 + len(SCORE_NAMES)]) == SCORE_NAMES
    assert {"value", "n", "ci_low", "ci_high", "model", "backend", "reason", "caveat"} <= set(
        s.names
    )


def test_registry_lists_loads_and_registers():
    for family in scoring.registry.families():
        for s in scoring.scorers(family):
            assert isinstance(s, Scorer | GroupStatistic) and s.header, s
    with pytest.raises(scoring.registry.UnknownMetric):
        scoring.scorer("evaluation", "nope")
    extra = ItemMean("extra", "extra", lambda i: 1.0)
    scoring.register("evaluation", extra)
    try:
        assert scoring.metric_names("evaluation")[-1] == "extra"
        assert scoring.scorer("evaluation", "extra") is extra
    finally:
        scoring.unregister("evaluation", "extra")
    assert "extra" not in scoring.metric_names("evaluation")
    with pytest.raises(TypeError):
        scoring.register("evaluation", object())  # type: ignore[arg-type]


FAMILY_DOCS = {
    "evaluation": "docs/evaluation.md",
    "reward": "docs/reward.md",
    "safeimg": "docs/safeimg.md",
    "fakebench": "docs/fakebench.md",
    "public": "docs/public-benchmarks.md",
}


def test_every_registered_metric_is_documented():
    for family, metrics in scoring.BUILTIN.items():
        doc = (ROOT / FAMILY_DOCS[family]).read_text()
        for name in metrics:
            assert f"`{name}`" in doc, (
                f"{name} ({family}) is not documented in {FAMILY_DOCS[family]}"
            )


def test_ratio_counts_the_denominator_and_resamples_items():
    """A Ratio's n is its denominator's sum; its value and every resample are sum / sum."""
    from forenset.benchmarks.common.scoring import Ratio

    first = Ratio("pb", "pb", lambda i: (float(i == "F"), float(i in "FS")), shift=0.5)
    items = ["F", "F", "S", "T", "F"]
    assert first.score(items).value == pytest.approx(3 / 4 - 0.5)
    assert first.count(items) == 4 and len(first.sample(items)) == 5
    assert first.score(["T"]).value is None and first.score(["T"]).reason
    x = first.sample(items)
    assert first.statistic(x[None, [3, 3]])[0] != first.statistic(x[None, [3, 3]])[0]  # NaN
    ci = bootstrap(x, first.statistic, resamples=200, level=0.9, seed=1)
    assert ci is not None and ci[0] <= 0.25 <= ci[1]


def test_units_bootstrap_recomputes_a_group_statistic_per_draw():
    """Draws of whole units in drawn order; a failing draw is counted, and voids all with
    strict; the reward arena's Elo / win-rate scorers give elo_intervals' intervals."""
    from forenset.benchmarks.common.scoring import units_bootstrap
    from forenset.benchmarks.reward.scorers import arena
    from forenset.benchmarks.reward.scorers.metrics import Game, elo_intervals

    games = [Game("a", "b", c) for c in ("First", "First", "Second", "Tie", "BothBad")] + [
        Game("b", "c", "First"),
        Game("a", "c", "Second"),
    ]
    base = sorted(games, key=lambda g: (g.first, g.second, g.choice))
    names = ["a", "b", "c"]
    params = {"k": 32.0, "shuffles": 5, "seed": 0}
    old = elo_intervals(games, names, 32.0, 300, [1, 2], level=0.9)
    for metric, want in ((arena.ELO, old.elo), (arena.WIN_RATE, old.win_rate)):
        got, failed = units_bootstrap(
            base, lambda d, m=metric: m.resample(d, names, params), resamples=300, level=0.9,
            seed=[1, 2],
        )  # fmt: skip
        assert failed == 0 and got == {p: v for p, v in want.items() if v is not None}
    assert set(arena.ELO.values(games, names, params)) == set(names)
    assert arena.GAMES.resample(games, names, params) is None and arena.GAMES.no_interval

    def flaky(draw):
        if draw[0] == 0:
            raise ArithmeticError("no fit")
        return {"s": float(sum(draw))}

    got, failed = units_bootstrap([0, 1, 2], flaky, resamples=50, level=0.9, seed=0)
    assert failed > 0 and got["s"][0] <= got["s"][1]
    assert units_bootstrap([0, 1, 2], flaky, resamples=50, level=0.9, seed=0, strict=True) == (
        {},
        failed,
    )


def test_pivot_by_a_group_field_makes_its_values_the_columns():
    rows = [
        {"model": m, "cat": c, "metric": "a", "value": v, "n": n}
        for m, c, v, n in (("x", "P2", 0.5, 20), ("x", "P1", 0.25, 12), ("y", "P1", None, 0))
    ]
    a = ItemMean("a", "A", lambda i: 1.0, percent=True)
    p = pivot(rows, ["model"], [a], by="cat", by_order=["P1", "P2"])
    assert p.headers == ["model", "n", "P1", "P2"]
    assert p.rows[0] == ["x", "20", "25.00 n=12", "50.00"]
    assert p.rows[1][2] == scoring.DASH and p.rows[1][3] == scoring.DASH
    two = pivot(rows, ["model"], [a, ItemMean("b", "B", lambda i: 1.0)], by="cat")
    assert two.headers == p.headers  # only metrics with rows are shown (no prefix for one)
