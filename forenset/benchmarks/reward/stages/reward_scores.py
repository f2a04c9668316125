"""reward_scores: the reward benchmark's tables, one row per number (Tables 1-5, Fig. 3).

- ``policy_accuracy`` (Tables 1-2): Acc_det of each policy over all / real / fake images and per
  generator (a missing verdict is wrong).
- ``elo`` (Tables 3, 5): policies ranked from the ground-truth labels (``labels_from`` = human or
  simulated) and from each judge's own choices (``labels_from`` = the judge): mean Elo over
  ``reward.elo_shuffles`` seeded game orders (start 1200, K = ``reward.elo_k``, Tie half a win,
  BothBad no game), Bradley-Terry beside it, games / wins / losses / ties / win rate as
  RewardBench prints them (games = wins + losses, win rate = wins / games, ties apart). A
  human-written policy (``kind: file``) is ranked like any other (Table 5).
- ``judge_accuracy`` (Table 4): Acc(4) and Acc(2) of each judge against the labels, per order
  (``shown``: as annotators saw the triplet; ``swapped``: answers given with the responses
  exchanged, mapped back).
- ``position_bias`` (Fig. 3): each rater's choice shares and the share of First among clear
  choices minus 0.5; for a judge asked both ways, ``extra.swap_consistency`` is the share of
  triplets whose two answers agree once mapped to one order.
- ``agreement``: pairwise inter-annotator agreement, 4-way and on clear-winner pairs.

Every row says which labels it was scored against (``labels_source``: human or simulated).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from forenset.benchmarks.common.reads import read_tagged
from forenset.benchmarks.reward.config import RewardConfig
from forenset.benchmarks.reward.schemas.reward_scores import SCHEMA
from forenset.benchmarks.reward.scorers.metrics import (
    Game,
    acc2,
    acc4,
    agreement,
    elo_table,
    position_shares,
)
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage, dumps

SHARD = "scores"
METRICS_MODEL = "reward-metrics-v1"
VALUES = (
    "value", "n", "acc4", "acc2", "n2", "elo", "elo_std", "bt", "games", "wins", "losses", "ties",
    "both_bad", "win_rate", "rank",
)  # fmt: skip


class RewardScores(Stage[RewardConfig]):
    name = "reward_scores"
    version = "2"  # 2: games = wins + losses, win rate = wins / games; BT fitted to convergence
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
        return {"elo_k": self.rcfg.elo_k, "elo_shuffles": self.rcfg.elo_shuffles}

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
        out = self.accuracy(part["reward_responses"], source)
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
                a4, n = acc4(choices, human)
                a2, n2 = acc2(choices, human)
                out.append(
                    self.score(
                        "judge_accuracy",
                        judge,
                        order,
                        source,
                        source,
                        value=a4,
                        n=n,
                        acc4=a4,
                        acc2=a2,
                        n2=n2,
                    )  # fmt: skip
                )
            extra: dict[str, Any] = {}
            if "swapped" in orders:
                both = [t for t in shown if t in orders["swapped"]]
                same = sum(shown[t] == orders["swapped"][t] for t in both)
                extra["swap_consistency"] = same / len(both) if both else None
            out.append(self.bias(judge, list(shown.values()), judge, source, extra))
        for r in out:
            r.update(
                backend="offline", model=METRICS_MODEL, status="ok", stage_version=self.version
            )
            r.setdefault("elapsed_ms", 0.0)
        return self.to_table(out)

    def score(
        self, table: str, subject: str, group: str, labels_from: str | None, source: str | None,
        **values: Any,
    ) -> dict[str, Any]:  # fmt: skip
        return {
            "score_id": f"{table}/{subject}/{group}/{labels_from or '-'}",
            "table": table,
            "subject": subject,
            "group": group,
            "labels_from": labels_from,
            "labels_source": source,
            **dict.fromkeys(VALUES),
            "extra": None,
            **values,
        }

    def accuracy(self, responses: list[dict[str, Any]], source: str | None) -> list[dict[str, Any]]:
        out = []
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
                acc = sum(r["verdict"] == r["label"] for r in rs) / len(rs)
                out.append(
                    self.score("policy_accuracy", policy, group, None, None, value=acc, n=len(rs))
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
        table = elo_table(games, policies, self.rcfg.elo_k, self.rcfg.elo_shuffles, self.ctx.seed)
        return [
            self.score(
                "elo",
                r.policy,
                "overall",
                labels_from,
                source,
                value=r.elo,
                elo=r.elo,
                elo_std=r.elo_std,
                bt=r.bt,
                games=r.games,
                wins=r.wins,
                losses=r.losses,
                ties=r.ties,
                both_bad=r.both_bad,
                win_rate=r.win_rate,
                rank=rank,
                n=len(games),
            )  # fmt: skip
            for rank, r in enumerate(table, 1)
        ]

    def bias(
        self, subject: str, choices: list[str | None], labels_from: str, source: str | None,
        extra: dict[str, Any],
    ) -> dict[str, Any]:  # fmt: skip
        s = position_shares(choices)
        return self.score(
            "position_bias", subject, "shown", labels_from, source, value=s["position_bias"],
            n=s["n"], extra=dumps({**{k: v for k, v in s.items() if k.startswith("share_")}, **extra}),
        )  # fmt: skip

    def annotators(self, labels: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
        by_item: dict[str, dict[str, str]] = {}
        kept: list[str | None] = []
        for r in labels:
            for a in json.loads(r["annotations"] or "[]"):
                if not a["dropped"]:
                    by_item.setdefault(r["triplet_id"], {})[a["annotator"]] = a["choice"]
                    kept.append(a["choice"])
        ag = agreement(by_item)
        return [
            self.bias("annotators", kept, source, source, {}),
            self.score(
                "agreement",
                "annotators",
                "4-way",
                source,
                source,
                value=ag["agree4"],
                n=ag["pairs4"],
            ),
            self.score(
                "agreement",
                "annotators",
                "clear",
                source,
                source,
                value=ag["agree_clear"],
                n=ag["pairs_clear"],
            ),
        ]
