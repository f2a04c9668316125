"""Reward-benchmark metrics, exactly as XAIGID-RewardBench §3.3-3.5 define them.

* ``acc4`` / ``acc2`` (§3.5): over the triplets with a ground-truth label H_t, the share where the
  judge's choice J_t equals H_t; Acc(2) only over the triplets whose H_t is First or Second. A
  judge's missing (unparseable) choice is never equal to H_t, so it counts as wrong.
* ``elo`` (§3.3, Table 3): every policy starts at 1200; a labelled triplet is one game between
  its two policies. First / Second: the shown-first / shown-second policy wins (score 1 / 0);
  Tie: half a win each (score 0.5); BothBad: *no game* (neither explanation is good, so the
  label says nothing about which policy is better). The paper does not state K: ``k`` defaults
  to 32. Sequential Elo depends on game order, so ``elo`` reports the mean rating over
  ``shuffles`` seeded random orders; ``bradley_terry`` is the order-free fit beside it. The
  table's counts are RewardBench's (Tables 3, 5): games = wins + losses, win rate = wins /
  games; ties are their own column (and half a win each in the ratings).
* ``agreement`` (§3.3 "Inter-human agreement"): pairwise agreement of annotators on the same
  triplet, 4-way and on clear-winner pairs (both annotators chose First or Second).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from forenset.errors import ForensetError

CHOICES: tuple[str, ...] = ("First", "Second", "Tie", "BothBad")
CLEAR: tuple[str, ...] = ("First", "Second")
START = 1200.0
K_DEFAULT = 32.0


def flip(choice: str | None) -> str | None:
    """The same preference seen with the two responses shown in the other order."""
    return {"First": "Second", "Second": "First"}.get(choice or "", choice)


def acc4(judge: Mapping[str, str | None], human: Mapping[str, str]) -> tuple[float | None, int]:
    """(Acc(4), |T|): share of labelled triplets whose judge choice equals the human label."""
    ts = list(human)
    if not ts:
        return None, 0
    return sum(judge.get(t) == human[t] for t in ts) / len(ts), len(ts)


def acc2(judge: Mapping[str, str | None], human: Mapping[str, str]) -> tuple[float | None, int]:
    """(Acc(2), |T2|): Acc(4) restricted to T2 = triplets whose human label is First/Second."""
    return acc4(judge, {t: h for t, h in human.items() if h in CLEAR})


@dataclass(frozen=True)
class Game:
    """One labelled triplet between two policies: ``first`` was shown first."""

    first: str
    second: str
    choice: str


def outcome(g: Game) -> float | None:
    """The first policy's score: 1, 0, 0.5 (Tie), or None (BothBad / no label: no game)."""
    return {"First": 1.0, "Second": 0.0, "Tie": 0.5}.get(g.choice)


@dataclass(frozen=True)
class Record:
    """A policy's Table 3 row as RewardBench prints it: games = wins + losses and win rate =
    wins / games (Tables 3 and 5 hold that on every row); ties (half a win each in the ratings)
    and both-bad triplets (no game) are their own columns; the mean Elo over shuffles, its
    standard deviation and the Bradley-Terry rating on the same scale."""

    policy: str
    elo: float
    elo_std: float
    bt: float
    games: int
    wins: int
    losses: int
    ties: int
    both_bad: int

    @property
    def win_rate(self) -> float | None:
        return self.wins / self.games if self.games else None


def elo_sequence(
    games: Sequence[Game], players: Iterable[str], k: float = K_DEFAULT, start: float = START
) -> dict[str, float]:
    """Sequential Elo over ``games`` in the given order (BothBad games are skipped)."""
    r = {p: start for p in players}
    for g in games:
        s = outcome(g)
        if s is None:
            continue
        ra, rb = r.setdefault(g.first, start), r.setdefault(g.second, start)
        ea = 1.0 / (1.0 + 10 ** ((rb - ra) / 400.0))
        r[g.first] = ra + k * (s - ea)
        r[g.second] = rb - k * (s - ea)
    return r


class NotConverged(ForensetError, ArithmeticError):
    """A fit that did not reach its tolerance within its iteration bound."""


BT_TOL = 1e-12
BT_MAX_ITERS = 100_000


def bradley_terry(
    games: Sequence[Game],
    players: Iterable[str],
    start: float = START,
    tol: float = BT_TOL,
    max_iters: int = BT_MAX_ITERS,
) -> dict[str, float]:
    """Bradley-Terry strengths on the Elo scale (1200 + 400 log10 p), fitted to convergence.

    The likelihood: ties count as half a win each, and each player also plays one virtual tie
    against a fixed reference of strength 1 (rating 1200), so an unbeaten or winless player stays
    finite and the log-likelihood is strictly concave. It is maximised by Newton's method with
    step halving (an ascent at every step), until no log-strength moves by more than ``tol``;
    a fit that does not get there in ``max_iters`` raises :class:`NotConverged` rather than
    returning a rating that is not the fit. Newton takes ~5-10 steps where Hunter's MM updates
    took hundreds (plain MM moves the common shift of all log-strengths by a factor close to 1
    per step: ~33,000 steps at 3,000 games of 7 players), which mattered in the bootstrap (one
    fit per draw). Order-free: only the per-player wins and per-pair game counts enter."""
    from scipy.special import expit

    names = sorted(set(players) | {p for g in games for p in (g.first, g.second)})
    idx = {p: i for i, p in enumerate(names)}
    n = len(names)
    if not n:
        return {}
    wins = np.full(n, 0.5)  # the virtual half-win against the reference
    pairs = np.zeros((n, n))  # games between i and j
    for g in games:
        s = outcome(g)
        if s is None:
            continue
        a, b = idx[g.first], idx[g.second]
        wins[a] += s
        wins[b] += 1 - s
        pairs[a, b] += 1
        pairs[b, a] += 1

    def loglik(t: np.ndarray) -> float:
        both = np.logaddexp(t[:, None], t[None, :])
        return float(wins @ t - 0.5 * np.sum(pairs * both) - np.sum(np.logaddexp(t, 0.0)))

    theta = np.zeros(n)  # log-strengths
    here = loglik(theta)
    step = math.inf
    for _ in range(max_iters):
        sig = expit(theta[:, None] - theta[None, :])  # P(i beats j)
        own = expit(theta)  # P(i beats the reference)
        grad = wins - np.sum(pairs * sig, axis=1) - own
        curv = pairs * sig * (1.0 - sig)
        hess = curv - np.diag(curv.sum(axis=1) + own * (1.0 - own))  # negative definite
        delta = np.linalg.solve(-hess, grad)
        alpha = 1.0
        while True:  # halve until the likelihood does not fall (it is concave: a step exists)
            new = theta + alpha * delta
            there = loglik(new)
            if there >= here - 1e-12 * abs(here) or alpha < 1e-10:
                break
            alpha *= 0.5
        step = float(np.max(np.abs(new - theta)))
        theta, here = new, there
        if step < tol:
            break
    else:
        raise NotConverged(
            f"Bradley-Terry did not converge to {tol} in {max_iters} iterations (last step {step})"
        )
    return {name: start + 400.0 * float(theta[idx[name]]) / math.log(10) for name in names}


def elo_table(
    games: Sequence[Game],
    players: Iterable[str] = (),
    k: float = K_DEFAULT,
    shuffles: int = 100,
    seed: int = 0,
    start: float = START,
) -> list[Record]:
    """Table 3 rows, best mean Elo first: Elo averaged over ``shuffles`` seeded orders of the
    games (``shuffles=0``: the given order only), Bradley-Terry beside it, and the counts."""
    names = sorted(set(players) | {p for g in games for p in (g.first, g.second)})
    orders = [list(games)]
    rng = np.random.default_rng(seed)
    if shuffles > 0:  # shuffles of one canonical order: the result cannot depend on the input's
        base = sorted(games, key=lambda g: (g.first, g.second, g.choice))
        orders = [[base[i] for i in rng.permutation(len(base))] for _ in range(shuffles)]
    runs = [elo_sequence(o, names, k, start) for o in orders]
    bt = bradley_terry(games, names, start)
    out = []
    for p in names:
        mine = [g for g in games if p in (g.first, g.second)]
        scores = [outcome(g) if g.first == p else flip_score(outcome(g)) for g in mine]
        vals = [r[p] for r in runs]
        out.append(
            Record(
                policy=p,
                elo=float(np.mean(vals)),
                elo_std=float(np.std(vals)),
                bt=bt[p],
                games=sum(s in (0.0, 1.0) for s in scores),
                wins=sum(s == 1.0 for s in scores),
                losses=sum(s == 0.0 for s in scores),
                ties=sum(s == 0.5 for s in scores),
                both_bad=sum(g.choice == "BothBad" for g in mine),
            )
        )
    return sorted(out, key=lambda r: (-r.elo, r.policy))


def flip_score(s: float | None) -> float | None:
    return None if s is None else 1.0 - s


# -- annotations ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Vote:
    """A triplet's consensus: the majority label, or None and ``tied`` when the top counts tie
    (listed for manual resolution); ``counts`` per choice of the kept annotations."""

    label: str | None
    tied: bool
    counts: dict[str, int]


def majority(choices: Sequence[str]) -> Vote:
    """Majority vote over one triplet's kept annotations (§3.3 "Filtering")."""
    counts = Counter(c for c in choices if c in CHOICES)
    if not counts:
        return Vote(None, False, {})
    top = max(counts.values())
    best = sorted(c for c, n in counts.items() if n == top)
    return Vote(best[0] if len(best) == 1 else None, len(best) > 1, dict(counts))


def agreement(by_item: Mapping[str, Mapping[str, str]]) -> dict[str, float | int | None]:
    """Pairwise inter-annotator agreement over items labelled by two or more annotators:
    ``agree4`` over all annotator pairs, ``agree_clear`` over the pairs where both chose
    First or Second (the paper: 68.0 % and 98.3 %), with the pair counts."""
    pairs4 = agree4 = pairs2 = agree2 = 0
    for labels in by_item.values():
        for a, b in combinations(sorted(labels), 2):
            x, y = labels[a], labels[b]
            pairs4 += 1
            agree4 += x == y
            if x in CLEAR and y in CLEAR:
                pairs2 += 1
                agree2 += x == y
    return {
        "agree4": agree4 / pairs4 if pairs4 else None,
        "pairs4": pairs4,
        "agree_clear": agree2 / pairs2 if pairs2 else None,
        "pairs_clear": pairs2,
    }


def position_shares(choices: Iterable[str | None]) -> dict[str, float | int | None]:
    """How often each choice was made (Fig. 3), and the position bias: the share of First among
    clear choices minus 0.5 (0 = no preference for the response shown first)."""
    c = Counter(x for x in choices if x in CHOICES)
    n = sum(c.values())
    clear = c["First"] + c["Second"]
    out: dict[str, float | int | None] = {f"share_{k}": (c[k] / n if n else None) for k in CHOICES}
    out["n"] = n
    out["position_bias"] = c["First"] / clear - 0.5 if clear else None
    return out


# -- intervals -----------------------------------------------------------------------------


def percentile_interval(
    samples: Sequence[float], level: float = 0.95
) -> tuple[float, float] | None:
    """The two-sided percentile interval of bootstrap replicates (0.95: the 2.5th and 97.5th
    percentiles); None without any finite replicate."""
    vals = [s for s in samples if math.isfinite(s)]
    if not vals:
        return None
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(np.asarray(vals, dtype=float), [alpha, 1.0 - alpha])
    return float(lo), float(hi)


@dataclass(frozen=True)
class EloIntervals:
    """Per policy: 95 % bootstrap intervals of Elo, Bradley-Terry and win rate (None: no replicate
    defined it), and how many resamples the Bradley-Terry fit did not converge on."""

    elo: dict[str, tuple[float, float] | None]
    bt: dict[str, tuple[float, float] | None]
    win_rate: dict[str, tuple[float, float] | None]
    bt_failed: int


def win_rates(games: Sequence[Game], names: Sequence[str]) -> dict[str, float]:
    """Wins / (wins + losses) of each named policy that won or lost a game (ties and BothBad
    are neither; RewardBench's Tables 3 and 5)."""
    won: Counter[str] = Counter()
    played: Counter[str] = Counter()
    for g in games:
        s = outcome(g)
        if s in (0.0, 1.0):
            played[g.first] += 1
            played[g.second] += 1
            won[g.first if s == 1.0 else g.second] += 1
    return {q: won[q] / played[q] for q in names if played[q]}


def elo_intervals(
    games: Sequence[Game],
    players: Iterable[str] = (),
    k: float = K_DEFAULT,
    resamples: int = 1000,
    seed: int | Sequence[int] = 0,
    start: float = START,
    level: float = 0.95,
) -> EloIntervals:
    """Bootstrap intervals as public arenas report them (Chatbot Arena): each of ``resamples``
    rounds draws len(games) games with replacement, in the drawn (random) order, plays one
    sequential Elo pass over them and fits Bradley-Terry; the interval is the 2.5th-97.5th
    percentile over rounds. Seeded: the same games and seed give the same intervals."""
    names = sorted(set(players) | {p for g in games for p in (g.first, g.second)})
    base = sorted(games, key=lambda g: (g.first, g.second, g.choice))
    empty: dict[str, tuple[float, float] | None] = dict.fromkeys(names)
    if not base or resamples <= 0:
        return EloIntervals(dict(empty), dict(empty), dict(empty), 0)
    rng = np.random.default_rng(seed)
    elo: dict[str, list[float]] = {p: [] for p in names}
    bt: dict[str, list[float]] = {p: [] for p in names}
    wr: dict[str, list[float]] = {p: [] for p in names}
    failed = 0
    for _ in range(resamples):
        draw = [base[i] for i in rng.integers(0, len(base), len(base))]
        for p, v in elo_sequence(draw, names, k, start).items():
            elo[p].append(v)
        try:
            for p, v in bradley_terry(draw, names, start).items():
                bt[p].append(v)
        except NotConverged:
            failed += 1
        for p, v in win_rates(draw, names).items():
            wr[p].append(v)
    return EloIntervals(
        {p: percentile_interval(v, level) for p, v in elo.items()},
        {p: percentile_interval(v, level) for p, v in bt.items()} if not failed else dict(empty),
        {p: percentile_interval(v, level) for p, v in wr.items()},
        failed,
    )
