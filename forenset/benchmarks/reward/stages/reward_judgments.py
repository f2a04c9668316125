"""reward_judgments: every judge's 4-way choice on every triplet (§3.4, §4.1).

A judge gets the image, the original policy prompt and both responses, and answers First /
Second / Tie / BothBad plus an elaboration. With ``reward.swap`` (default) it is asked twice, the
second time with the responses exchanged (``order = swapped``); ``choice_shown`` maps every answer
back to the order annotators saw, so accuracy and position bias compare like with like. One
shard per judge (``judge=`` partition), fingerprinted by that judge (and ``swap``) only.

``rules``: the offline rubric judge (``benchmarks/reward/scorers/rubric.py``), a real algorithm that reads
the two texts and never the image's true label. ``llm``: template ``reward_judge`` through one
``call_validated`` per shard; a reply that does not start with a choice is an ok row with
``choice`` null and ``parse_error`` (a wrong judgment), a failed call an error row.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from forenset.benchmarks.reward.config import JudgeConfig, RewardConfig
from forenset.benchmarks.reward.schemas.reward_judgments import SCHEMA
from forenset.benchmarks.reward.scorers.metrics import flip
from forenset.benchmarks.reward.scorers.replies import parse_judge
from forenset.benchmarks.reward.scorers.rubric import RULE_MODEL, RuleJudge
from forenset.confbase import fingerprint_view
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage, describe, writable
from forenset.tasks.modelcall import call_validated, request, template_hashes
from forenset.text.templates import render

TEMPLATE = "reward_judge"
POLICY_TEMPLATE = "reward_policy"


def _no_check(parsed: Any) -> list[str]:
    return []


def judge_config(j: JudgeConfig, swap: bool) -> dict[str, Any]:
    view = {**fingerprint_view(j), "swap": swap}
    if j.kind == "llm":
        view["templates"] = template_hashes([TEMPLATE, POLICY_TEMPLATE], None)
    return view


class RewardJudgments(Stage[RewardConfig]):
    name = "reward_judgments"
    version = "1"
    inputs = ("reward_triplets",)
    input_columns = ("triplet_id", "blob", "first_reply", "second_reply")
    output_schema = SCHEMA
    key = "judgment_id"
    partition_by = ("judge",)
    config_key = "reward"
    gather = True

    @property
    def rcfg(self) -> RewardConfig:
        return self.cfg

    def judge(self, name: str) -> JudgeConfig:
        return next(j for j in self.rcfg.judges if j.name == name)

    def stage_config(self) -> Any:
        return {"judges": [judge_config(j, self.rcfg.swap) for j in self.rcfg.judges]}

    def spec(self, shard_id, partition, inputs, params, config=None):
        """A judge's shard is fingerprinted by that judge (and ``swap``) only."""
        if "judge" not in params:
            return super().spec(shard_id, partition, inputs, params, config)
        own = judge_config(self.judge(params["judge"]), self.rcfg.swap)
        return super().spec(shard_id, partition, inputs, params, config=own)

    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        if not self.rcfg.enabled or not upstream:
            return []
        return [
            self.spec(j.name, {"judge": j.name}, upstream, {"judge": j.name})
            for j in self.rcfg.judges
        ]

    def orders(self) -> tuple[str, ...]:
        return ("shown", "swapped") if self.rcfg.swap else ("shown",)

    def base(self, j: JudgeConfig, t: dict[str, Any], order: str) -> dict[str, Any]:
        return {
            "judgment_id": f"{j.name}/{order}/{t['triplet_id']}",
            "judge": j.name,
            "triplet_id": t["triplet_id"],
            "order": order,
        }

    @staticmethod
    def texts(t: dict[str, Any], order: str) -> tuple[str, str]:
        a, b = t["first_reply"] or "", t["second_reply"] or ""
        return (a, b) if order == "shown" else (b, a)

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        assert shard is not None
        j = self.judge(shard.params["judge"])
        trips = sorted(batch.to_pylist(), key=lambda t: t["triplet_id"])
        out = self.rules(j, trips) if j.kind == "rules" else self.model(j, trips)
        for r in out:
            r.setdefault("status", "ok")
            r.setdefault("stage_version", self.version)
        return self.to_table(out)

    def answered(self, base: dict[str, Any], reply: str, **trace: Any) -> dict[str, Any]:
        got = parse_judge(reply)
        shown = flip(got.choice) if base["order"] == "swapped" else got.choice
        return {
            **base,
            "choice": got.choice,
            "choice_shown": shown,
            "elaboration": got.elaboration,
            "reply": reply,
            "parse_error": got.reason,
            **trace,
        }

    def rules(self, j: JudgeConfig, trips: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rj = RuleJudge(j.bad_below, j.tie_margin)
        out = []
        for t in trips:
            for order in self.orders():
                base = self.base(j, t, order)
                try:
                    choice, why = rj.judge(*self.texts(t, order))
                    out.append(self.answered(base, why, backend="offline", model=RULE_MODEL))
                except Exception as e:  # noqa: BLE001 - one bad triplet is its own error row
                    out.append({**base, "status": "error", "error": describe(e), "retryable": True})
        return out

    def model(self, j: JudgeConfig, trips: list[dict[str, Any]]) -> list[dict[str, Any]]:
        assert j.llm is not None
        prompt = render(POLICY_TEMPLATE, None)[1]
        out, asks = [], []
        for t in trips:
            try:
                png = self.ctx.store.get_blob(t["blob"])
            except Exception as e:  # noqa: BLE001 - a missing blob fails this triplet only
                for order in self.orders():
                    err = {"status": "error", "error": writable(describe(e)), "retryable": True}
                    out.append({**self.base(j, t, order), **err})
                continue
            for order in self.orders():
                base = self.base(j, t, order)
                first, second = self.texts(t, order)
                req = request(
                    self.name, base["judgment_id"], TEMPLATE, None, images=[png],
                    response_model=None,  # the reply is free text
                    prompt=prompt, first=first, second=second,
                )  # fmt: skip
                asks.append((base, req))
        got = call_validated(self.ctx, self.name, j.llm, [(r, _no_check) for _, r in asks], 1)
        for base, req in asks:
            o = got[req.item_id]
            if not o.result.ok:
                out.append({**base, **o.trace(), "reply": o.result.text or None})
                continue
            out.append(self.answered(base, o.result.text or "", **o.trace()))
        return out
