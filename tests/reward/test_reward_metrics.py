"""Reward metrics on hand-computed cases: Acc(4)/Acc(2), Elo, Bradley-Terry, votes, agreement."""

from __future__ import annotations

import math

import numpy as np
import pytest

from forenset.benchmarks.reward.scorers.metrics import (
    Game,
    NotConverged,
    acc2,
    acc4,
    agreement,
    bradley_terry,
    elo_intervals,
    elo_sequence,
    elo_table,
    flip,
    majority,
    position_shares,
)

HUMAN = {"t1": "First", "t2": "Second", "t3": "Tie", "t4": "BothBad"}


def test_acc4_and_acc2_follow_section_3_5():
    judge = {"t1": "First", "t2": "First", "t3": "Tie", "t4": None}  # t4 unparsed: wrong
    assert acc4(judge, HUMAN) == (0.5, 4)  # t1, t3 right
    assert acc2(judge, HUMAN) == (0.5, 2)  # T2 = {t1, t2}; t1 right
    perfect_on_clear = {"t1": "First", "t2": "Second", "t3": "BothBad", "t4": "Tie"}
    assert acc4(perfect_on_clear, HUMAN) == (0.5, 4)
    assert acc2(perfect_on_clear, HUMAN) == (1.0, 2)
    assert acc4({}, {}) == (None, 0) and acc2(judge, {"t3": "Tie"}) == (None, 0)


def test_one_game_k32_and_the_tie_and_bothbad_rules():
    assert elo_sequence([Game("a", "b", "First")], "ab") == {"a": 1216.0, "b": 1184.0}
    assert elo_sequence([Game("a", "b", "Second")], "ab") == {"a": 1184.0, "b": 1216.0}
    assert elo_sequence([Game("a", "b", "Tie")], "ab") == {"a": 1200.0, "b": 1200.0}
    assert elo_sequence([Game("a", "b", "BothBad")], "ab") == {"a": 1200.0, "b": 1200.0}
    assert elo_sequence([Game("a", "b", "First")], "ab", k=10) == {"a": 1205.0, "b": 1195.0}
    # a tie between unequal players moves the stronger one down: 1216 vs 1184, E_a = 0.546
    r = elo_sequence([Game("a", "b", "First"), Game("a", "b", "Tie")], "ab")
    e_a = 1 / (1 + 10 ** ((1184 - 1216) / 400))
    assert r["a"] == pytest.approx(1216 + 32 * (0.5 - e_a)) and r["a"] < 1216


def test_two_games_in_sequence_by_hand():
    r = elo_sequence([Game("a", "b", "First"), Game("b", "a", "First")], "ab")
    e_b = 1 / (1 + 10 ** ((1216 - 1184) / 400))  # 0.45404
    assert r["b"] == pytest.approx(1184 + 32 * (1 - e_b)) == pytest.approx(1201.47, abs=0.01)
    assert r["a"] == pytest.approx(2400 - r["b"])


def test_three_policy_toy_has_the_known_order_and_counts():
    games = (
        [Game("a", "b", "First")] * 3
        + [Game("c", "a", "Second")] * 3  # a shown second, still wins
        + [Game("b", "c", "First")] * 2
        + [Game("b", "c", "Tie")]
        + [Game("a", "c", "BothBad")] * 2  # no game
    )
    table = elo_table(games, k=32, shuffles=50, seed=1)
    assert [r.policy for r in table] == ["a", "b", "c"]
    by = {r.policy: r for r in table}
    # RewardBench's Tables 3/5: games = wins + losses, win rate = wins / games; ties apart
    assert (by["a"].games, by["a"].wins, by["a"].losses, by["a"].ties) == (6, 6, 0, 0)
    assert (by["b"].games, by["b"].wins, by["b"].losses, by["b"].ties) == (5, 2, 3, 1)
    assert (by["c"].games, by["c"].wins, by["c"].losses, by["c"].ties) == (5, 0, 5, 1)
    assert by["a"].both_bad == 2 and by["b"].both_bad == 0
    assert by["a"].win_rate == 1.0 and by["b"].win_rate == pytest.approx(2 / 5)
    assert by["c"].win_rate == 0.0
    assert by["a"].bt > by["b"].bt > by["c"].bt
    assert sum(r.elo for r in table) == pytest.approx(3 * 1200)  # Elo is zero-sum


def test_elo_mean_and_bradley_terry_do_not_depend_on_game_order():
    games = [Game("a", "b", "First"), Game("b", "c", "Second"), Game("c", "a", "Tie")] * 4
    games += [Game("a", "c", "Second"), Game("b", "a", "First")]
    one = elo_table(games, shuffles=20, seed=3)
    other = elo_table(list(reversed(games)), shuffles=20, seed=3)
    assert [(r.policy, r.elo, r.bt) for r in one] == [(r.policy, r.elo, r.bt) for r in other]
    # while a single sequential pass does depend on the order
    assert elo_sequence(games, "abc") != elo_sequence(list(reversed(games)), "abc")


def test_bradley_terry_is_symmetric_and_finite():
    even = bradley_terry([Game("a", "b", "First"), Game("a", "b", "Second")], "ab")
    assert even["a"] == pytest.approx(1200) and even["b"] == pytest.approx(1200)
    unbeaten = bradley_terry([Game("a", "b", "First")] * 5, "ab")
    assert math.isfinite(unbeaten["a"]) and unbeaten["a"] > 1200 > unbeaten["b"]
    assert unbeaten["a"] - 1200 == pytest.approx(1200 - unbeaten["b"])
    assert bradley_terry([], "ab") == {"a": 1200.0, "b": 1200.0}


def test_table_3_rows_hold_games_and_win_rate_as_rewardbench_prints_them():
    # RewardBench Table 3 row 3 (o3): 753 games, 397 wins, 356 losses, win rate 0.527
    games = [Game("o3", "x", "First")] * 397 + [Game("x", "o3", "First")] * 356
    games += [Game("o3", "x", "Tie")] * 40 + [Game("o3", "x", "BothBad")] * 9
    o3 = {r.policy: r for r in elo_table(games, shuffles=2)}["o3"]
    assert (o3.games, o3.wins, o3.losses, o3.ties, o3.both_bad) == (753, 397, 356, 40, 9)
    assert round(o3.win_rate, 3) == 0.527
    for r in elo_table(games, shuffles=2):
        assert r.games == r.wins + r.losses and r.win_rate == pytest.approx(r.wins / r.games)


def _bt_games(n: int = 3000, players: int = 7, seed: int = 0) -> list[Game]:
    """Seeded triplets over ``players`` policies of spread-out strength, with ties and both-bad."""
    rng = np.random.default_rng(seed)
    names = [f"p{i}" for i in range(players)]
    true = np.linspace(-3.0, 3.0, players)
    out = []
    for _ in range(n):
        a, b = rng.choice(players, 2, replace=False)
        u = rng.random()
        if u < 0.1:
            choice = "Tie"
        elif u < 0.2:
            choice = "BothBad"
        else:
            choice = "First" if rng.random() < 1 / (1 + math.exp(true[b] - true[a])) else "Second"
        out.append(Game(names[a], names[b], choice))
    return out


def _sklearn_bt(games: list[Game]) -> dict[str, float]:
    """The same model fitted independently: a logistic regression on the pairwise design (one
    column per player, +1 for the first, -1 for the second, no intercept, no penalty); a tie is a
    half-weighted win and a half-weighted loss; each player's virtual tie against the 1200
    reference is a row with only its own column."""
    from sklearn.linear_model import LogisticRegression

    names = sorted({p for g in games for p in (g.first, g.second)})
    idx = {p: i for i, p in enumerate(names)}
    rows, ys, ws = [], [], []

    def add(x: np.ndarray, s: float) -> None:
        rows.extend([x, x])
        ys.extend([1, 0])
        ws.extend([s, 1 - s])

    for g in games:
        s = {"First": 1.0, "Second": 0.0, "Tie": 0.5}.get(g.choice)
        if s is not None:
            x = np.zeros(len(names))
            x[idx[g.first]], x[idx[g.second]] = 1.0, -1.0
            add(x, s)
    for i in range(len(names)):
        add(np.eye(len(names))[i], 0.5)
    fit = LogisticRegression(fit_intercept=False, C=np.inf, solver="newton-cg", tol=1e-12,
                             max_iter=10_000)  # fmt: skip
    fit.fit(np.array(rows), ys, sample_weight=ws)
    return {p: 1200 + 400 * fit.coef_[0][i] / math.log(10) for p, i in idx.items()}


def test_bradley_terry_equals_an_independent_logistic_regression_fit():
    """At 3,000 triplets over 7 policies the old fixed 2,000 MM steps left every rating ~37
    points off the maximum-likelihood fit; the fit to tolerance agrees with scikit-learn."""
    for games in (_bt_games(), _bt_games(30)):
        ours, ref = bradley_terry(games, []), _sklearn_bt(games)
        assert set(ours) == set(ref)
        for p in ref:
            assert ours[p] == pytest.approx(ref[p], abs=1e-6), p


def test_bradley_terry_that_cannot_converge_says_so():
    with pytest.raises(NotConverged):
        bradley_terry(_bt_games(300), [], max_iters=1)


def test_majority_vote_agreement_and_position_shares():
    assert majority(["First", "First", "Second"]).label == "First"
    tie = majority(["First", "Second"])
    assert tie.label is None and tie.tied and tie.counts == {"First": 1, "Second": 1}
    assert majority([]).label is None and not majority([]).tied
    ag = agreement(
        {
            "t1": {"x": "First", "y": "First"},
            "t2": {"x": "First", "y": "Tie"},
            "t3": {"x": "Second", "y": "First"},
            "t4": {"x": "BothBad"},  # one annotator: no pair
        }
    )
    assert ag == {"agree4": 1 / 3, "pairs4": 3, "agree_clear": 0.5, "pairs_clear": 2}
    s = position_shares(["First", "First", "Second", "Tie", None])
    assert s["n"] == 4 and s["share_First"] == 0.5 and s["share_BothBad"] == 0.0
    assert s["position_bias"] == pytest.approx(2 / 3 - 0.5)
    assert flip("First") == "Second" and flip("Tie") == "Tie" and flip(None) is None


def test_elo_intervals_are_seeded_bracket_the_ratings_and_narrow_with_more_games():
    """Arena-style bootstrap over games: the same seed gives the same intervals; a policy that
    wins 70 % of its games has a win-rate interval around 0.7 that shrinks with 10x the games."""
    rng = np.random.default_rng(5)
    few = [Game("a", "b", "First" if rng.random() < 0.7 else "Second") for _ in range(40)]
    many = [Game("a", "b", "First" if rng.random() < 0.7 else "Second") for _ in range(400)]
    one = elo_intervals(few, "ab", resamples=300, seed=1)
    assert one == elo_intervals(few, "ab", resamples=300, seed=1)
    assert one != elo_intervals(few, "ab", resamples=300, seed=2)
    table = {r.policy: r for r in elo_table(few, shuffles=0)}
    lo, hi = one.bt["a"]
    assert lo < table["a"].bt < hi and one.bt_failed == 0
    lo, hi = one.win_rate["a"]
    assert lo < table["a"].win_rate < hi
    big = elo_intervals(many, "ab", resamples=300, seed=1)
    assert big.win_rate["a"][1] - big.win_rate["a"][0] < hi - lo
    assert elo_intervals([], "ab", resamples=10).elo == {"a": None, "b": None}
