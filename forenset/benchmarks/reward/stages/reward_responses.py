"""reward_responses: every policy's response ``r = (y, e)`` to every reward image (§3.2).

One shard per policy (``policy=`` partition), fingerprinted by that policy only. Kinds
(``reward.policies``, see ``PolicyConfig``):

- ``detector``: the evaluation family's offline forensic detector, trained the same way (a seeded
  draw of ``train_per_class`` per label from the train split, ``common.training``). Grounded,
  its explanation is the measured region and numbers; not grounded, the same verdict with a
  generic sentence — two real policies of different explanation quality.
- ``constant``: always ``answer``, with a generic sentence (the floor of Table 1).
- ``llm``: the paper's policy prompt (template ``reward_policy``) with the image, one request per
  image through ``call_validated``; the reply is parsed by ``parse_policy``. A reply without a
  one-word verdict is an ok row with ``verdict`` null and ``parse_error`` (a wrong detection);
  a failed call is an error row.
- ``file``: written responses (``sample_id`` = reward image id, ``answer``, ``explanation``),
  read with the detections file reader; images it does not cover get no row, problems are one
  error row per class of problem.
- a plugin responder (``forenset.responders``): its reply is parsed as a model's is.

Each kind is a responder (``common.responders``) run by ``common.respond``, which isolates each
image's failure (an error row; the shard goes on).

With ``reward.release`` the responses are the release's policy files instead (no images, no
policies run): one shard per policy file name (``FI<policy>`` / ``RI<policy>``), kind ``file``,
the verdict by the release's rule; rows the release cannot give are error rows, those naming no
usable policy in a shard of their own (``policy=release-problems``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from forenset.benchmarks.common.reads import read_tagged
from forenset.benchmarks.common.respond import (
    Answer,
    Question,
    fingerprint,
    render,
    respond,
    trains,
)
from forenset.benchmarks.common.responders import ResponderConfig
from forenset.benchmarks.reward.config import RewardConfig
from forenset.benchmarks.reward.release import PROBLEMS_PARTITION
from forenset.benchmarks.reward.schemas.reward_responses import SCHEMA
from forenset.benchmarks.reward.scorers.replies import parse_policy
from forenset.benchmarks.reward.stages.release_input import release_config, release_rows
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage, writable

TEMPLATE = "reward_policy"


def policy_config(p: ResponderConfig) -> dict[str, Any]:
    return fingerprint(p, [TEMPLATE], None)


def reply_of(verdict: str, explanation: str) -> str:
    """A response in the policy prompt's shape: the one-word verdict, then the explanation."""
    return f"{verdict.capitalize()}. {explanation}".strip()


def _unreadable(text: str) -> str | None:
    return parse_policy(text).reason


class RewardResponses(Stage[RewardConfig]):
    name = "reward_responses"
    version = "2"  # 2: the offline detector trains class-balanced
    inputs = ("splits", "reward_images")
    input_columns = {
        "splits": ("sample_id", "label", "split", "blob"),  # the detector policies' training
        "reward_images": ("reward_image_id", "generator", "label", "image_id", "blob"),
    }
    output_schema = SCHEMA
    key = "response_id"
    partition_by = ("policy",)
    config_key = "reward"
    gather = True

    @property
    def rcfg(self) -> RewardConfig:
        return self.cfg

    def policy(self, name: str) -> ResponderConfig:
        return next(p for p in self.rcfg.policies if p.name == name)

    def stage_config(self) -> Any:
        return {"policies": [policy_config(p) for p in self.rcfg.policies]}

    def spec(self, shard_id, partition, inputs, params, config=None):
        """A policy's shard is fingerprinted by that policy only: adding or changing one policy
        leaves the others' responses alone."""
        if params.get("release"):
            return super().spec(shard_id, partition, inputs, params, release_config(self))
        if "policy" not in params:
            return super().spec(shard_id, partition, inputs, params, config)
        own = {"policy": policy_config(self.policy(params["policy"]))}
        return super().spec(shard_id, partition, inputs, params, config=own)

    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        if self.rcfg.enabled and self.rcfg.release is not None:
            return self.plan_release()
        images = [i for i in upstream if i.stage == "reward_images"]
        if not self.rcfg.enabled or not images:
            return []
        splits = [i for i in upstream if i.stage == "splits"]
        out = []
        for p in self.rcfg.policies:
            ins = [*splits, *images] if trains(p) else images
            out.append(self.spec(p.name, {"policy": p.name}, ins, {"policy": p.name}))
        return out

    def plan_release(self) -> list[ShardSpec]:
        """One shard per policy of the release (no inputs: the release is the input)."""
        rows = release_rows(self, self.name)
        names = sorted({r["policy"] for r in rows if r["status"] == "ok"})
        if any(r["status"] == "error" for r in rows):
            names.append(PROBLEMS_PARTITION)
        return [self.spec(n, {"policy": n}, [], {"policy": n, "release": True}) for n in names]

    def from_release(self, name: str) -> pa.Table:
        rows = release_rows(self, self.name)
        if name == PROBLEMS_PARTITION:
            mine = [r for r in rows if r["status"] == "error"]
        else:
            mine = [r for r in rows if r["status"] == "ok" and r["policy"] == name]
        for r in mine:
            r.update(backend="release", model="policy-files", stage_version=self.version)
            if r["status"] == "ok":  # a release has no image, no generator; the text is all
                explanation = parse_policy(r["reply"]).explanation
                r.update(blob=None, generator=None, explanation=explanation)
        return self.to_table(mine)

    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        return read_tagged(self, shard)

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        assert shard is not None
        if shard.params.get("release"):
            return self.from_release(shard.params["policy"])
        p = self.policy(shard.params["policy"])
        rows = batch.to_pylist()
        images = sorted(
            (r for r in rows if r["input"] == "reward_images"), key=lambda r: r["reward_image_id"]
        )
        train = [r for r in rows if r["input"] == "splits" and r["split"] == "train"]
        questions = [
            Question(
                qid=f"{p.name}/{im['reward_image_id']}",
                item=im,
                key=im["reward_image_id"],
                template=TEMPLATE,
                unreadable=_unreadable,
            )
            for im in images
        ]
        got = respond(self, p, questions, train)
        out: list[dict[str, Any]] = []
        for q in questions:
            a = got.by_qid[q.qid]
            if a.missing:  # a file that does not cover this image: no response
                continue
            base = self.base(p, q.item)
            if not a.ok:
                out.append({**base, **a.error_fields()})
                continue
            out.extend(render(self, base, self.answered, p, q.item, a))
        for key, sentence in got.problems:
            out.append(
                {
                    "response_id": f"{p.name}/file-problem/{key}",
                    "policy": p.name,
                    "policy_kind": p.kind,
                    "backend": got.backend,
                    "model": got.model,
                    "status": "error",
                    "error": writable(sentence),
                    "retryable": False,
                }
            )
        for r in out:
            r.setdefault("status", "ok")
            r.setdefault("stage_version", self.version)
        return self.to_table(out)

    def base(self, p: ResponderConfig, im: dict[str, Any]) -> dict[str, Any]:
        return {
            "response_id": f"{p.name}/{im['reward_image_id']}",
            "policy": p.name,
            "policy_kind": p.kind,
            **{k: im[k] for k in ("reward_image_id", "image_id", "generator", "label", "blob")},
        }

    def answered(self, p: Any, im: dict[str, Any], a: Answer) -> dict[str, Any]:
        """One response row: a detector's verdict with its measured (or, not grounded, a
        generic) explanation, a constant's or a file's verdict and sentence, or a model's
        reply, all in the policy prompt's shape and read by ``parse_policy``."""
        if a.detection is not None:
            found = a.detection
            grounded = getattr(p, "grounded", True)
            expl = found.reasoning if grounded else generic(found.answer)
            model = found.model + ("" if grounded else "-ungrounded")
            reply = reply_of(found.answer, expl)
            return self.parsed(p, im, reply, backend=found.backend, model=model)
        if a.reply is None and a.verdict is not None:  # a constant: a generic sentence
            reply = reply_of(a.verdict, a.explanation or generic(a.verdict))
            return self.parsed(p, im, reply, **a.trace)
        if p.kind == "file":
            reply = reply_of(str(a.verdict).strip(), str(a.explanation))
            return self.parsed(p, im, reply, **a.trace)
        return self.parsed(p, im, a.reply or "", **a.trace)

    def parsed(
        self, p: ResponderConfig, im: dict[str, Any], reply: str, **trace: Any
    ) -> dict[str, Any]:
        got = parse_policy(reply)
        return {
            **self.base(p, im),
            "verdict": got.verdict,
            "correct": got.verdict == im["label"],
            "explanation": got.explanation,
            "reply": reply,
            "parse_error": got.reason,
            **trace,
        }


def generic(verdict: str) -> str:
    """An ungrounded explanation: the verdict restated without evidence (weaker by design)."""
    if verdict == "fake":
        return "The image does not look quite right overall, so it is probably AI-generated."
    return "The image looks like an ordinary photograph overall, so it is probably real."
