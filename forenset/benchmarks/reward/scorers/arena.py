"""The reward benchmark's arena metrics (Tables 3 and 5) as registry scorers: Elo, its spread
over game orders, Bradley-Terry, the counts, rank and win rate of each policy.

They are :class:`~forenset.benchmarks.common.scoring.GroupStatistic` scorers, not item means:
one value per policy from all the labelled games of a table (its ``elo`` group), computed
once per table by :func:`arena` (:func:`~.metrics.elo_table`: mean Elo over
``params["shuffles"]`` seeded orders with ``params["k"]``, Bradley-Terry beside it). Elo,
Bradley-Terry and win rate have intervals over the games as public arenas compute them: each
bootstrap draw of the games (in the drawn order) gets one sequential Elo pass, one Bradley-Terry
fit (a draw where it does not converge voids every BT interval of the table: ``strict``), and
the win rates. The counts, rank and the Elo spread have no interval (``no_interval``).
``n`` is the table's games, except win rate: the policy's games (wins + losses).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from forenset.benchmarks.common.scoring import degenerate
from forenset.benchmarks.reward.scorers.metrics import (
    START,
    Game,
    Record,
    bradley_terry,
    elo_sequence,
    elo_table,
    win_rates,
)

SCOPE = {"table": ("elo",)}
NO_CI_COUNT = "a count: no interval"
NO_CI_STD = "a spread over game orders: no interval"
NO_GAMES = "{p} played no game (its rating is the start, 1200)"


@lru_cache(maxsize=8)
def _arena(
    games: tuple[Game, ...], players: tuple[str, ...], k: float, shuffles: int, seed: int
) -> tuple[tuple[Record, int], ...]:
    table = elo_table(list(games), players, k, shuffles, seed)
    return tuple((r, rank) for rank, r in enumerate(table, 1))


def arena(
    games: Sequence[Game], players: Sequence[str], params: Mapping[str, Any]
) -> dict[str, tuple[Record, int]]:
    """Each policy's Table 3 record and rank (computed once per table and parameters)."""
    got = _arena(
        tuple(games), tuple(players), float(params["k"]), int(params["shuffles"]),
        int(params["seed"]),
    )  # fmt: skip
    return {r.policy: (r, rank) for r, rank in got}


def _elo_draw(draw: Sequence[Game], names: Sequence[str], p: Mapping[str, Any]) -> dict[str, float]:
    return elo_sequence(draw, names, float(p["k"]), START)


def _bt_draw(draw: Sequence[Game], names: Sequence[str], p: Mapping[str, Any]) -> dict[str, float]:
    return bradley_terry(draw, names, START)  # raises NotConverged (an ArithmeticError)


def _win_rate_draw(
    draw: Sequence[Game], names: Sequence[str], p: Mapping[str, Any]
) -> dict[str, float]:
    return win_rates(draw, names)


Draw = Callable[[Sequence[Game], Sequence[str], Mapping[str, Any]], dict[str, float]]


@dataclass(frozen=True)
class ArenaMetric:
    """One column of Table 3: ``value(record, rank)`` per policy; ``per_policy_n``: n is the
    policy's games (else the table's); ``draw``: the statistic on one bootstrap draw of the
    games (None: no interval, ``no_interval`` says why); ``caveat``: the value is flagged when
    its n is small (and Elo / BT when the policy played no game)."""

    name: str
    header: str
    value: Callable[[Record, int], float | None]
    draw: Draw | None = None
    no_interval: str | None = None
    strict: bool = False
    per_policy_n: bool = False
    caveat: bool = False
    reason: str = "undefined for this policy"
    percent: bool = False
    digits: int = 1
    scope: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: dict(SCOPE))

    def values(
        self, units: Sequence[Any], subjects: Sequence[str], params: Mapping[str, Any]
    ) -> dict[str, tuple[float | None, int]]:
        out = {}
        for p, (r, rank) in arena(units, subjects, params).items():
            v = self.value(r, rank)
            out[p] = (None if v is None else float(v), r.games if self.per_policy_n else len(units))
        return out

    def caveats(
        self, units: Sequence[Any], subjects: Sequence[str], params: Mapping[str, Any], min_n: int
    ) -> dict[str, str | None]:
        """Why each policy's value is not meaningful: Elo / BT of a policy that played no game
        (its rating is the start), else too few games (the table's; win rate: the policy's)."""
        if not self.caveat:
            return {}
        out: dict[str, str | None] = {}
        for p, (r, _) in arena(units, subjects, params).items():
            if self.per_policy_n:
                out[p] = degenerate(r.games, min_n) if r.games else None
            elif not r.games + r.ties:
                out[p] = NO_GAMES.format(p=p)
            else:
                out[p] = degenerate(len(units), min_n)
        return out

    def resample(
        self, draw: Sequence[Any], subjects: Sequence[str], params: Mapping[str, Any]
    ) -> dict[str, float] | None:
        return None if self.draw is None else self.draw(draw, subjects, params)


def _count(name: str, header: str, get: Callable[[Record, int], float]) -> ArenaMetric:
    return ArenaMetric(name, header, get, no_interval=NO_CI_COUNT, digits=0)


ELO = ArenaMetric("elo", "Elo", lambda r, _: r.elo, _elo_draw, caveat=True)
ELO_STD = ArenaMetric("elo_std", "Elo sd", lambda r, _: r.elo_std, no_interval=NO_CI_STD)
BT = ArenaMetric("bt", "BT", lambda r, _: r.bt, _bt_draw, strict=True, caveat=True)
RANK = _count("rank", "rank", lambda r, rank: rank)
GAMES = _count("games", "games", lambda r, _: r.games)
WINS = _count("wins", "wins", lambda r, _: r.wins)
LOSSES = _count("losses", "losses", lambda r, _: r.losses)
TIES = _count("ties", "ties", lambda r, _: r.ties)
BOTH_BAD = _count("both_bad", "both bad", lambda r, _: r.both_bad)
WIN_RATE = ArenaMetric(
    "win_rate", "win rate", lambda r, _: r.win_rate, _win_rate_draw, per_policy_n=True,
    caveat=True, reason="no games won or lost (wins + losses = 0)", digits=3,
)  # fmt: skip
