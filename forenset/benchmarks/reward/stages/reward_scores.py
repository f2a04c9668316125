"""reward_scores: the reward benchmark's numbers in long format, one row per (group, metric).

A group is (``table``, ``subject``, ``group``, ``labels_from``); each row holds one ``metric``
with its ``value``, ``n``, a seeded 95 % bootstrap interval (``ci_low`` / ``ci_high``, or
``ci_reason``) and a ``caveat`` when the number is not meaningful (``reward.intervals``:
resamples, level, seed, min_n). The CLI and the report pivot it back to the paper's tables.

- ``policy_accuracy`` (Tables 1-2): metric ``accuracy``, Acc_det of each policy over all / real
  / fake images and per generator (a missing verdict is wrong); interval over the responses.
- ``elo`` (Tables 3, 5): policies ranked from the ground-truth labels (``labels_from`` = human or
  simulated) and from each judge's own choices (``labels_from`` = the judge): metric ``elo``, the
  mean over ``reward.elo_shuffles`` seeded game orders (start 1200, K = ``reward.elo_k``, Tie
  half a win, BothBad no game) with ``elo_std``; ``bt`` (Bradley-Terry); ``games`` / ``wins`` /
  ``losses`` / ``ties`` / ``both_bad`` / ``win_rate`` / ``rank`` as RewardBench prints them
  (games = wins + losses, win rate = wins / games, ties apart). Elo, BT and win rate have
  bootstrap intervals over the games as public arenas compute them (resample the games, one
  Elo pass in the drawn order, percentiles). ``n`` is the table's labelled games (win rate: the
  policy's games). A human-written policy (``kind: file``) is ranked like any other (Table 5).
- ``judge_accuracy`` (Table 4): ``acc4`` (n = |T|) and ``acc2`` (n = |T2|) of each judge against
  the labels, per order (``shown``; ``swapped``: answers given with the responses exchanged,
  mapped back); intervals over the triplets.
- ``position_bias`` (Fig. 3): each rater's choice shares ``share_<choice>`` (n = its choices),
  ``position_bias`` = the share of First among clear choices minus 0.5 (n = clear choices); for
  a judge asked both ways, ``swap_consistency`` is the share of triplets whose two answers agree
  once mapped to one order (n = triplets asked both ways).
- ``agreement``: pairwise inter-annotator agreement (metric ``agreement``), group ``4-way`` and
  ``clear`` (n = annotator pairs; the interval resamples triplets, not pairs).

Every row says which labels it was scored against (``labels_source``: human or simulated).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from forenset.benchmarks.common.reads import read_tagged
from forenset.benchmarks.common.scoring.intervals import bootstrap, degenerate, row_seed
from forenset.benchmarks.reward.config import RewardConfig
from forenset.benchmarks.reward.schemas.reward_scores import SCHEMA
from forenset.benchmarks.reward.scorers.metrics import (
    CHOICES,
    CLEAR,
    Game,
    agreement,
    elo_intervals,
    elo_table,
    position_shares,
)
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage

SHARD = "scores"
METRICS_MODEL = "reward-metrics-v1"
COUNTS = ("games", "wins", "losses", "ties", "both_bad", "rank")
NO_CI_COUNT = "a count: no interval"
NO_CI_STD = "a spread over game orders: no interval"
NO_RESAMPLES = "no interval: reward.intervals.resamples is 0"
NO_CI_ITEMS = "no interval: fewer than two items or no defined resample"
NO_GAMES = "{p} played no game (its rating is the start, 1200)"
BT_FAILED = "no interval: Bradley-Terry did not converge on {k} resample(s)"


def _mean(a: np.ndarray) -> np.ndarray:
    return a[..., 0].mean(axis=1)


def _column(i: int) -> Callable[[np.ndarray], np.ndarray]:
    """The mean of column i per resample (a share of one-hot rows)."""
    return lambda a: a[..., i].mean(axis=1)


def _ratio(num: int, den: int, shift: float = 0.0) -> Callable[[np.ndarray], np.ndarray]:
    """sum(column num) / sum(column den) - shift per resample (NaN where the sum is 0)."""

    def stat(a: np.ndarray) -> np.ndarray:
        top, bottom = a[..., num].sum(axis=1), a[..., den].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1) - shift, np.nan)

    return stat


class RewardScores(Stage[RewardConfig]):
    name = "reward_scores"
    # 2: games = wins + losses, win rate = wins / games; BT fitted to convergence
    # 3: long format (one row per metric) with n, bootstrap intervals and caveats
    version = "3"
    inputs = ("reward_responses", "reward_triplets", "reward_judgments", "reward_labels")
    input_columns = {
        "reward_responses": ("response_id", "policy", "generator", "label", "verdict"),
        "reward_triplets": ("triplet_id", "first_policy", "second_policy"),
        "reward_judgments": ("judge", "triplet_id", "order", "choice_shown"),
        "reward_labels": ("triplet_id", "source", "label", "annotations"),
    }
    output_schema = SCHEMA
    key = "score_id"
    config_key = "reward"
    gather = True

    @property
    def rcfg(self) -> RewardConfig:
        return self.cfg

    def stage_config(self) -> Any:
        return {
            "elo_k": self.rcfg.elo_k,
            "elo_shuffles": self.rcfg.elo_shuffles,
            "intervals": self.rcfg.intervals.model_dump(),
        }

    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        if not self.rcfg.enabled or not any(i.stage == "reward_triplets" for i in upstream):
            return []
        return [self.spec(SHARD, {}, upstream, {})]

    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        return read_tagged(self, shard)

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        rows = batch.to_pylist()
        part = {s: [r for r in rows if r["input"] == s] for s in self.inputs}
        labels = [r for r in part["reward_labels"] if r.get("label")]
        source = next((r["source"] for r in part["reward_labels"]), None)
        human = {r["triplet_id"]: r["label"] for r in labels}
        out = self.accuracy(part["reward_responses"])
        trips = {t["triplet_id"]: t for t in part["reward_triplets"]}
        policies = sorted({r["policy"] for r in part["reward_responses"]})
        if source:
            out += self.elo(trips, human, source, source, policies)
            out += self.annotators(part["reward_labels"], source)
        judges: dict[str, dict[str, dict[str, str | None]]] = {}
        for j in part["reward_judgments"]:
            judges.setdefault(j["judge"], {}).setdefault(j["order"], {})[j["triplet_id"]] = j[
                "choice_shown"
            ]
        for judge, orders in sorted(judges.items()):
            shown = orders.get("shown", {})
            out += self.elo(trips, {t: c for t, c in shown.items() if c}, judge, source, policies)
            for order, choices in sorted(orders.items()):
                key = ("judge_accuracy", judge, order, source, source)
                t4 = list(human)
                t2 = [t for t in t4 if human[t] in CLEAR]
                for metric, ts in (("acc4", t4), ("acc2", t2)):
                    hits = [float(choices.get(t) == human[t]) for t in ts]
                    out.append(self.mean_row(*key, metric, hits))
            extra: list[float] | None = None
            if "swapped" in orders:
                both = [t for t in shown if t in orders["swapped"]]
                extra = [float(shown[t] == orders["swapped"][t]) for t in both]
            out += self.bias(judge, list(shown.values()), judge, source, extra)
        for r in out:
            r.setdefault("model", METRICS_MODEL)
            r.update(backend="offline", status="ok", stage_version=self.version)
            r.setdefault("elapsed_ms", 0.0)
        return self.to_table(out)

    # -- rows ---------------------------------------------------------------------------------
    def row(
        self, table: str, subject: str, group: str, labels_from: str | None, source: str | None,
        metric: str, value: float | None, n: int, *, ci: tuple[float, float] | None = None,
        ci_reason: str | None = None, reason: str | None = None, caveat: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        if ci is None and ci_reason is None:
            ci_reason = (
                f"no interval: {reason}" if value is None and reason else self.no_ci_reason()
            )
        return {
            "score_id": f"{table}/{subject}/{group}/{labels_from or '-'}/{metric}",
            "table": table,
            "subject": subject,
            "group": group,
            "labels_from": labels_from,
            "labels_source": source,
            "metric": metric,
            "value": None if value is None else float(value),
            "n": n,
            "ci_low": None if ci is None else ci[0],
            "ci_high": None if ci is None else ci[1],
            "ci_reason": None if ci is not None else ci_reason,
            "reason": reason if value is None else None,
            "caveat": caveat,
            "details": None if details is None else json.dumps(details, sort_keys=True),
            "seed": self.base_seed(),  # the bootstrap's seed (with the row key: row_seed)
        }

    def no_ci_reason(self) -> str:
        return NO_RESAMPLES if self.rcfg.intervals.resamples < 1 else NO_CI_ITEMS

    def base_seed(self) -> int:
        iv = self.rcfg.intervals
        return self.ctx.seed if iv.seed is None else iv.seed

    def seed(self, key: str) -> list[int]:
        return row_seed(self.base_seed(), key)

    def interval(
        self, x: np.ndarray, stat: Callable[[np.ndarray], np.ndarray], key: str
    ) -> tuple[float, float] | None:
        iv = self.rcfg.intervals
        return bootstrap(x, stat, resamples=iv.resamples, level=iv.level, seed=self.seed(key))

    def mean_row(
        self, table: str, subject: str, group: str, labels_from: str | None, source: str | None,
        metric: str, values: list[float], caveat: str | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """A share over items (1.0 = hit): its mean, n, interval over the items and caveat."""
        n = len(values)
        if not n:
            return self.row(
                table, subject, group, labels_from, source, metric, None, 0,
                reason="no items to score",
            )  # fmt: skip
        key = f"{table}/{subject}/{group}/{labels_from or '-'}/{metric}"
        ci = self.interval(np.asarray(values), _mean, key)
        return self.row(
            table, subject, group, labels_from, source, metric, sum(values) / n, n, ci=ci,
            caveat=caveat or degenerate(n, self.rcfg.intervals.min_n),
        )  # fmt: skip

    # -- tables -------------------------------------------------------------------------------
    def accuracy(self, responses: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        min_n = self.rcfg.intervals.min_n
        for policy in sorted({r["policy"] for r in responses}):
            mine = [r for r in responses if r["policy"] == policy]
            groups: dict[str, list[dict[str, Any]]] = {"overall": mine}
            for lab in ("real", "fake"):
                groups[lab] = [r for r in mine if r["label"] == lab]
            for gen in sorted({r["generator"] for r in mine if r["label"] == "fake"}):
                groups[gen] = [r for r in mine if r["generator"] == gen]
            for group, rs in groups.items():
                if not rs:
                    continue
                # Tables 1-2's real / fake / generator columns are one class by design; only
                # the overall accuracy needs both classes to be a detection score
                classes = [r["label"] for r in rs] if group == "overall" else None
                caveat = degenerate(len(rs), min_n, classes, ("real", "fake"))
                hits = [float(r["verdict"] == r["label"]) for r in rs]
                out.append(
                    self.mean_row(
                        "policy_accuracy", policy, group, None, None, "accuracy", hits, caveat
                    )
                )
        return out

    def elo(
        self, trips: dict[str, dict[str, Any]], labels: dict[str, str], labels_from: str,
        source: str | None, policies: list[str],
    ) -> list[dict[str, Any]]:  # fmt: skip
        games = [
            Game(trips[t]["first_policy"], trips[t]["second_policy"], c)
            for t, c in sorted(labels.items())
            if t in trips and c
        ]
        cfg, iv = self.rcfg, self.rcfg.intervals
        table = elo_table(games, policies, cfg.elo_k, cfg.elo_shuffles, self.ctx.seed)
        ivs = elo_intervals(
            games, policies, cfg.elo_k, iv.resamples, self.seed(f"elo/{labels_from}"),
            level=iv.level,
        )  # fmt: skip
        few = degenerate(len(games), iv.min_n)
        out = []
        for rank, r in enumerate(table, 1):
            key = ("elo", r.policy, "overall", labels_from, source)
            played = r.games + r.ties
            caveat = NO_GAMES.format(p=r.policy) if not played else few
            ci_reason = (
                NO_RESAMPLES if iv.resamples < 1 else NO_CI_ITEMS if len(games) < 2 else None
            )
            bt_reason = BT_FAILED.format(k=ivs.bt_failed) if ivs.bt_failed else ci_reason
            out += [
                self.row(*key, "elo", r.elo, len(games), ci=ivs.elo[r.policy],
                         ci_reason=ci_reason or NO_CI_ITEMS, caveat=caveat),
                self.row(*key, "elo_std", r.elo_std, len(games), ci_reason=NO_CI_STD),
                self.row(*key, "bt", r.bt, len(games), ci=ivs.bt[r.policy],
                         ci_reason=bt_reason or NO_CI_ITEMS, caveat=caveat),
                self.row(*key, "win_rate", r.win_rate, r.games, ci=ivs.win_rate[r.policy],
                         ci_reason=ci_reason or NO_CI_ITEMS,
                         reason="no games won or lost (wins + losses = 0)",
                         caveat=degenerate(r.games, iv.min_n) if r.games else None),
            ]  # fmt: skip
            counts = {"games": r.games, "wins": r.wins, "losses": r.losses, "ties": r.ties,
                      "both_bad": r.both_bad, "rank": rank}  # fmt: skip
            out += [
                self.row(*key, m, float(counts[m]), len(games), ci_reason=NO_CI_COUNT)
                for m in COUNTS
            ]
        return out

    def bias(
        self, subject: str, choices: list[str | None], labels_from: str, source: str | None,
        swap: list[float] | None = None,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """Choice shares, position bias and (a judge asked both ways) swap consistency."""
        s = position_shares(choices)
        kept = [c for c in choices if c in CHOICES]
        onehot = np.asarray([[c == x for x in CHOICES] for c in kept], dtype=float).reshape(
            -1, len(CHOICES)
        )
        key = ("position_bias", subject, "shown", labels_from, source)
        prefix = "/".join(str(k or "-") for k in key)
        min_n = self.rcfg.intervals.min_n
        n = int(s["n"] or 0)
        out = []
        for i, c in enumerate(CHOICES):
            ci = self.interval(onehot, _column(i), f"{prefix}/share_{c}") if n else None
            v = s[f"share_{c}"]
            out.append(
                self.row(*key, f"share_{c}", v, n, ci=ci, reason="no choices",
                         caveat=degenerate(n, min_n) if n else None)
            )  # fmt: skip
        # the First share of the clear choices minus 0.5: columns First / (First + Second)
        clear = onehot[:, :2].copy()
        clear = np.column_stack([clear[:, 0], clear.sum(axis=1)]) if n else clear
        n_clear = int(clear[:, 1].sum()) if n else 0
        ci = self.interval(clear, _ratio(0, 1, 0.5), f"{prefix}/position_bias") if n else None
        out.append(
            self.row(*key, "position_bias", s["position_bias"], n_clear, ci=ci,
                     reason="no clear (First / Second) choices",
                     caveat=degenerate(n_clear, min_n) if n_clear else None)
        )  # fmt: skip
        if swap is not None:
            out.append(self.mean_row(*key, "swap_consistency", swap))
        return out

    def annotators(self, labels: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
        by_item: dict[str, dict[str, str]] = {}
        kept: list[str | None] = []
        for r in labels:
            for a in json.loads(r["annotations"] or "[]"):
                if not a["dropped"]:
                    by_item.setdefault(r["triplet_id"], {})[a["annotator"]] = a["choice"]
                    kept.append(a["choice"])
        ag = agreement(by_item)
        # per triplet: (agreeing pairs, pairs) 4-way and clear, resampled by triplet
        per = np.asarray(
            [
                [_n(a["agree4"]) * _n(a["pairs4"]), _n(a["pairs4"]),
                 _n(a["agree_clear"]) * _n(a["pairs_clear"]), _n(a["pairs_clear"])]
                for a in (agreement({t: v}) for t, v in sorted(by_item.items()))
            ],
            dtype=float,
        ).reshape(-1, 4)  # fmt: skip
        min_n = self.rcfg.intervals.min_n
        out = self.bias("annotators", kept, source, source)
        for group, value, n, cols in (
            ("4-way", ag["agree4"], ag["pairs4"], (0, 1)),
            ("clear", ag["agree_clear"], ag["pairs_clear"], (2, 3)),
        ):
            key = ("agreement", "annotators", group, source, source)
            prefix = "/".join(str(k or "-") for k in key)
            ci = self.interval(per, _ratio(*cols), f"{prefix}/agreement") if n else None
            out.append(
                self.row(*key, "agreement", value, int(n or 0), ci=ci,
                         reason="no pair of annotators on one triplet",
                         caveat=degenerate(int(n), min_n) if n else None)
            )  # fmt: skip
        return out


def _n(v: float | int | None) -> float:
    """An agreement count or share as a number (None: no pair, so nothing to count)."""
    return float(v or 0)
