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
  With ``reward.release`` one more Elo table, ``labels_from`` = ``annotations``: the release's
  own convention (every First / Second annotation a game, records in order; with
  ``elo_shuffles: 0`` the release's ``calculate_elo.py`` rating, :func:`annotation_games`).
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
from collections.abc import Sequence
from functools import partial
from typing import Any

import pyarrow as pa

from forenset.benchmarks.common.reads import read_tagged
from forenset.benchmarks.common.scoring import (
    GroupStatistic,
    Item,
    Metric,
    Ratio,
    Scorer,
    bootstrap,
    degenerate,
    row_seed,
    scorers,
    units_bootstrap,
)
from forenset.benchmarks.reward.config import RewardConfig
from forenset.benchmarks.reward.schemas.reward_scores import SCHEMA
from forenset.benchmarks.reward.scorers.metrics import Game, agreement
from forenset.benchmarks.reward.scorers.tables import METRICS_MODEL
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage

SHARD = "scores"
NO_RESAMPLES = "no interval: reward.intervals.resamples is 0"
NO_CI_ITEMS = "no interval: fewer than two items or no defined resample"
BT_FAILED = "no interval: {name} did not converge on {k} resample(s)"
FAILED_NAMES = {"bt": "Bradley-Terry"}


def in_scope(metric: Metric, table: str, items: Sequence[Item] | None = None) -> bool:
    """The metric scores this table's groups; with ``items``: and some item carries every
    field it ``needs`` (swap consistency only for a judge asked both ways)."""
    if table not in metric.scope.get("table", ()):
        return False
    needs = getattr(metric, "needs", ())
    return not items or not needs or any(all(f in i for f in needs) for i in items)


class RewardScores(Stage[RewardConfig]):
    name = "reward_scores"
    # 2: games = wins + losses, win rate = wins / games; BT fitted to convergence
    # 3: long format (one row per metric) with n, bootstrap intervals and caveats
    version = "3"
    inputs = ("reward_responses", "reward_triplets", "reward_judgments", "reward_labels")
    input_columns = {
        "reward_responses": ("response_id", "policy", "generator", "label", "verdict"),
        "reward_triplets": ("triplet_id", "first_policy", "second_policy", "position"),
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
        view: dict[str, Any] = {
            "elo_k": self.rcfg.elo_k,
            "elo_shuffles": self.rcfg.elo_shuffles,
            "intervals": self.rcfg.intervals.model_dump(),
        }
        if self.rcfg.release is not None:  # absent otherwise: other builds keep their prints
            view["annotation_elo"] = True
        return view

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
            if self.rcfg.release is not None:
                games = annotation_games(trips, part["reward_labels"])
                out += self.elo(trips, {}, ANNOTATIONS, source, policies, games)
        judges: dict[str, dict[str, dict[str, str | None]]] = {}
        for j in part["reward_judgments"]:
            judges.setdefault(j["judge"], {}).setdefault(j["order"], {})[j["triplet_id"]] = j[
                "choice_shown"
            ]
        for judge, orders in sorted(judges.items()):
            shown = orders.get("shown", {})
            out += self.elo(trips, {t: c for t, c in shown.items() if c}, judge, source, policies)
            for order, choices in sorted(orders.items()):
                items = [{"choice": choices.get(t), "label": h} for t, h in human.items()]
                key = ("judge_accuracy", judge, order, source, source)
                out += self.item_rows(key, items)
            swapped = orders.get("swapped")
            mine: list[dict[str, Any]] = []
            for t, c in shown.items():
                mine.append({"choice": c})
                if swapped is not None:  # 1.0: the two answers agree once mapped to one order
                    mine[-1]["swap"] = float(c == swapped[t]) if t in swapped else None
            out += self.item_rows(("position_bias", judge, "shown", judge, source), mine)
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

    def item_rows(
        self, key: tuple[str, str, str, str | None, str | None], items: Sequence[Item],
        classes: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """Every registered per-item metric of ``key``'s table on one group's items: its value,
        n, interval over the items (seeded by the row key) and caveat (``classes``: the truth
        labels when the group must hold both classes to be a detection score)."""
        iv = self.rcfg.intervals
        out = []
        for s in scorers("reward"):
            if not isinstance(s, Scorer) or not in_scope(s, key[0], items):
                continue
            score = s.score(items)
            x = s.sample(items)
            count = getattr(s, "count", None)
            n = count(items) if count is not None else (0 if x is None else len(x))
            if score.value is None:
                out.append(self.row(*key, s.name, None, n, reason=score.reason))
                continue
            # the seed key since version 3: an item mean's score_id; a ratio's group key with
            # its labels source (kept so that a rebuild gives the same intervals)
            parts = key if isinstance(s, Ratio) else key[:4]
            score_id = "/".join(str(k or "-") for k in parts) + f"/{s.name}"
            ci = None
            if x is not None:
                ci = bootstrap(
                    x, s.statistic, resamples=iv.resamples, level=iv.level,
                    seed=self.seed(score_id),
                )  # fmt: skip
            caveat = degenerate(n, iv.min_n, classes, s.classes if classes is not None else ())
            out.append(self.row(*key, s.name, score.value, n, ci=ci, caveat=caveat))
        return out

    # -- tables -------------------------------------------------------------------------------
    def accuracy(self, responses: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for policy in sorted({r["policy"] for r in responses}):
            mine = [r for r in responses if r["policy"] == policy]
            groups: dict[str, list[dict[str, Any]]] = {"overall": mine}
            for lab in ("real", "fake"):
                groups[lab] = [r for r in mine if r["label"] == lab]
            # a release's responses name no generator: the fake column is all there is
            for gen in sorted({r["generator"] for r in mine if r["label"] == "fake"} - {None}):
                groups[gen] = [r for r in mine if r["generator"] == gen]
            for group, rs in groups.items():
                if not rs:
                    continue
                # Tables 1-2's real / fake / generator columns are one class by design; only
                # the overall accuracy needs both classes to be a detection score
                classes = [r["label"] for r in rs] if group == "overall" else None
                key = ("policy_accuracy", policy, group, None, None)
                out += self.item_rows(key, rs, classes)
        return out

    def elo(
        self, trips: dict[str, dict[str, Any]], labels: dict[str, str], labels_from: str,
        source: str | None, policies: list[str], games: list[Game] | None = None,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """Every registered arena metric (a GroupStatistic over this table's games) per policy;
        the intervals of one table share one seeded sequence of game draws. ``games``: these
        games instead of one per label (:func:`annotation_games`)."""
        if games is None:
            games = [
                Game(trips[t]["first_policy"], trips[t]["second_policy"], c)
                for t, c in sorted(labels.items())
                if t in trips and c
            ]
        cfg, iv = self.rcfg, self.rcfg.intervals
        params = {"k": cfg.elo_k, "shuffles": cfg.elo_shuffles, "seed": self.ctx.seed}
        base = sorted(games, key=lambda g: (g.first, g.second, g.choice))  # order-free draws
        names = sorted(set(policies) | {p for g in games for p in (g.first, g.second)})
        ci_reason = NO_RESAMPLES if iv.resamples < 1 else NO_CI_ITEMS if len(games) < 2 else None
        out = []
        for s in scorers("reward"):
            if not isinstance(s, GroupStatistic) or not in_scope(s, "elo"):
                continue
            values = s.values(games, names, params)
            flag = getattr(s, "caveats", None)
            caveats: dict[str, str | None] = (
                flag(games, names, params, iv.min_n) if flag is not None else {}
            )
            cis: dict[str, tuple[float, float] | None] = {}
            why = s.no_interval
            if why is None:
                cis, failed = units_bootstrap(
                    base, partial(_draw, s, names, params),
                    resamples=iv.resamples, level=iv.level, seed=self.seed(f"elo/{labels_from}"),
                    strict=s.strict,
                )  # fmt: skip
                why = (
                    BT_FAILED.format(name=FAILED_NAMES.get(s.name, s.name), k=failed)
                    if failed and s.strict
                    else ci_reason or NO_CI_ITEMS
                )
            for p in names:
                value, n = values[p]
                out.append(
                    self.row(
                        "elo",
                        p,
                        "overall",
                        labels_from,
                        source,
                        s.name,
                        value,
                        n,
                        ci=cis.get(p),
                        ci_reason=why,
                        reason=getattr(s, "reason", None),
                        caveat=caveats.get(p),
                    )  # fmt: skip
                )
        return out

    def annotators(self, labels: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
        """The annotators' position bias (their kept choices) and pairwise agreement, 4-way
        and on clear winners (items: triplets, so the interval resamples triplets)."""
        by_item: dict[str, dict[str, str]] = {}
        kept: list[dict[str, Any]] = []
        for r in labels:
            for a in json.loads(r["annotations"] or "[]"):
                if not a["dropped"]:
                    by_item.setdefault(r["triplet_id"], {})[a["annotator"]] = a["choice"]
                    kept.append({"choice": a["choice"]})
        per = [agreement({t: v}) for t, v in sorted(by_item.items())]
        out = self.item_rows(("position_bias", "annotators", "shown", source, source), kept)
        for group, share, pairs in (
            ("4-way", "agree4", "pairs4"), ("clear", "agree_clear", "pairs_clear"),
        ):  # fmt: skip
            items = [{"agree": _count(a[share], a[pairs]), "pairs": a[pairs]} for a in per]
            out += self.item_rows(("agreement", "annotators", group, source, source), items)
        return out


ANNOTATIONS = "annotations"  # labels_from of the release's Elo: every annotation a game


def annotation_games(trips: dict[str, dict[str, Any]], labels: list[dict[str, Any]]) -> list[Game]:
    """The release's Elo games (its ``calculate_elo.py``): every kept First / Second annotation
    is a game (no majority vote; Tie and BothBad none), triplets in their presentation order (a
    release's: its records' sorted order), annotations in their file order."""
    order = sorted(
        (r for r in labels if r["triplet_id"] in trips),
        key=lambda r: (trips[r["triplet_id"]].get("position") or 0, r["triplet_id"]),
    )
    out = []
    for r in order:
        t = trips[r["triplet_id"]]
        for a in json.loads(r["annotations"] or "[]"):
            if not a["dropped"] and a["choice"] in ("First", "Second"):
                out.append(Game(t["first_policy"], t["second_policy"], a["choice"]))
    return out


def _draw(
    s: GroupStatistic, names: Sequence[str], params: dict[str, Any], draw: list[Any]
) -> dict[str, float]:
    """``s``'s statistic on one bootstrap draw of the games."""
    return s.resample(draw, names, params) or {}


def _count(share: float | int | None, pairs: float | int | None) -> int:
    """The agreeing pairs of one triplet from its share (None: no pair, nothing to count)."""
    return round(float(share or 0) * float(pairs or 0))
