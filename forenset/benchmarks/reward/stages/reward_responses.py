"""reward_responses: every policy's response ``r = (y, e)`` to every reward image (§3.2).

One shard per policy (``policy=`` partition), fingerprinted by that policy only. Kinds
(``reward.policies``, see ``PolicyConfig``):

- ``detector``: the evaluation family's offline forensic detector, trained the same way (a seeded
  draw of ``train_per_class`` per label from the train split, ``Detections.trained``). Grounded,
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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from forenset.benchmarks.common.predictions import file_digest, read_predictions
from forenset.benchmarks.common.reads import read_tagged
from forenset.benchmarks.common.responders import DetectorConfig
from forenset.benchmarks.common.training import trained_detector
from forenset.benchmarks.reward.config import PolicyConfig, RewardConfig
from forenset.benchmarks.reward.schemas.reward_responses import SCHEMA
from forenset.benchmarks.reward.scorers.replies import parse_policy
from forenset.confbase import fingerprint_view
from forenset.errors import ConfigurationError
from forenset.images import decode_rgb
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ContractError, ShardSpec, Stage, StageRowError, describe, writable
from forenset.tasks.modelcall import call_validated, request, template_hashes

TEMPLATE = "reward_policy"


def _no_check(parsed: Any) -> list[str]:
    """Replies are free text: ``parse_policy`` reads them."""
    return []


def policy_config(p: PolicyConfig) -> dict[str, Any]:
    view = fingerprint_view(p)
    if p.kind == "llm":
        view["templates"] = template_hashes([TEMPLATE], None)
    if p.kind == "file" and p.path:
        view["file_sha256"] = file_digest(p.path)
    return view


def reply_of(verdict: str, explanation: str) -> str:
    """A response in the policy prompt's shape: the one-word verdict, then the explanation."""
    return f"{verdict.capitalize()}. {explanation}".strip()


class RewardResponses(Stage[RewardConfig]):
    name = "reward_responses"
    version = "1"
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

    def policy(self, name: str) -> PolicyConfig:
        return next(p for p in self.rcfg.policies if p.name == name)

    def stage_config(self) -> Any:
        return {"policies": [policy_config(p) for p in self.rcfg.policies]}

    def spec(self, shard_id, partition, inputs, params, config=None):
        """A policy's shard is fingerprinted by that policy only: adding or changing one policy
        leaves the others' responses alone."""
        if "policy" not in params:
            return super().spec(shard_id, partition, inputs, params, config)
        own = {"policy": policy_config(self.policy(params["policy"]))}
        return super().spec(shard_id, partition, inputs, params, config=own)

    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        images = [i for i in upstream if i.stage == "reward_images"]
        if not self.rcfg.enabled or not images:
            return []
        splits = [i for i in upstream if i.stage == "splits"]
        out = []
        for p in self.rcfg.policies:
            ins = [*splits, *images] if p.kind == "detector" else images
            out.append(self.spec(p.name, {"policy": p.name}, ins, {"policy": p.name}))
        return out

    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        return read_tagged(self, shard)

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        assert shard is not None
        p = self.policy(shard.params["policy"])
        rows = batch.to_pylist()
        images = sorted(
            (r for r in rows if r["input"] == "reward_images"), key=lambda r: r["reward_image_id"]
        )
        if p.kind == "detector":
            train = [r for r in rows if r["input"] == "splits" and r["split"] == "train"]
            out = self.detector(p, images, train)
        elif p.kind == "constant":
            out = [
                self.answered(p, im, p.answer, generic(p.answer), "offline", f"constant-{p.answer}")
                for im in images
            ]
        elif p.kind == "llm":
            out = self.model(p, images)
        else:
            out = self.from_file(p, images)
        for r in out:
            r.setdefault("status", "ok")
            r.setdefault("stage_version", self.version)
        return self.to_table(out)

    def base(self, p: PolicyConfig, im: dict[str, Any]) -> dict[str, Any]:
        return {
            "response_id": f"{p.name}/{im['reward_image_id']}",
            "policy": p.name,
            "policy_kind": p.kind,
            **{k: im[k] for k in ("reward_image_id", "image_id", "generator", "label", "blob")},
        }

    def answered(
        self, p: PolicyConfig, im: dict[str, Any], verdict: str, expl: str, backend: str, model: str
    ) -> dict[str, Any]:
        return self.parsed(p, im, reply_of(verdict, expl), backend=backend, model=model)

    def parsed(
        self, p: PolicyConfig, im: dict[str, Any], reply: str, **trace: Any
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

    def failed(
        self, p: PolicyConfig, im: dict[str, Any], msg: str, retryable: bool
    ) -> dict[str, Any]:
        return {
            **self.base(p, im),
            "status": "error",
            "error": writable(msg),
            "retryable": retryable,
        }

    # -- detector ------------------------------------------------------------------------
    def detector(
        self, p: PolicyConfig, images: list[dict[str, Any]], train: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        d = DetectorConfig(name=p.name, classifier=p.classifier, train_per_class=p.train_per_class)
        try:
            det = trained_detector(self.ctx, d, train)
        except StageRowError as e:
            return [self.failed(p, im, str(e), e.retryable) for im in images]
        out = []
        for im in images:
            try:
                found = det.explain(decode_rgb(self.ctx.store.get_blob(im["blob"])))
                expl = found.reasoning if p.grounded else generic(found.answer)
                model = found.model + ("" if p.grounded else "-ungrounded")
                out.append(self.answered(p, im, found.answer, expl, found.backend, model))
            except (ConfigurationError, ContractError):
                raise
            except Exception as e:  # noqa: BLE001 - one bad image must not fail the shard
                out.append(self.failed(p, im, describe(e), True))
        return out

    # -- llm ------------------------------------------------------------------------------
    def model(self, p: PolicyConfig, images: list[dict[str, Any]]) -> list[dict[str, Any]]:
        assert p.llm is not None
        out, asks = [], []
        for im in images:
            try:
                png = self.ctx.store.get_blob(im["blob"])
            except Exception as e:  # noqa: BLE001 - a missing blob is this image's error
                out.append(self.failed(p, im, describe(e), True))
                continue
            rid = f"{p.name}/{im['reward_image_id']}"
            req = request(self.name, rid, TEMPLATE, None, images=[png], response_model=None)
            asks.append((im, req))
        got = call_validated(self.ctx, self.name, p.llm, [(r, _no_check) for _, r in asks], 1)
        for im, req in asks:
            o = got[req.item_id]
            if not o.result.ok:
                out.append({**self.base(p, im), **o.trace(), "reply": o.result.text or None})
                continue
            out.append(self.parsed(p, im, o.result.text or "", **o.trace()))
        return out

    # -- file -------------------------------------------------------------------------------
    def from_file(self, p: PolicyConfig, images: list[dict[str, Any]]) -> list[dict[str, Any]]:
        assert p.path
        preds, problems = read_predictions(p.path, {im["reward_image_id"] for im in images})
        name = Path(p.path).name
        out: list[dict[str, Any]] = []
        for im in images:
            pr = preds.get(im["reward_image_id"])
            if pr is not None:
                reply = reply_of(str(pr["answer"]).strip(), str(pr["explanation"]))
                out.append(self.parsed(p, im, reply, backend="file", model=name))
        for cls, sentence in problems.items():
            out.append(
                {
                    "response_id": f"{p.name}/file-problem/{cls}",
                    "policy": p.name,
                    "policy_kind": p.kind,
                    "backend": "file",
                    "model": name,
                    "status": "error",
                    "error": writable(sentence),
                    "retryable": False,
                }
            )
        return out


def generic(verdict: str) -> str:
    """An ungrounded explanation: the verdict restated without evidence (weaker by design)."""
    if verdict == "fake":
        return "The image does not look quite right overall, so it is probably AI-generated."
    return "The image looks like an ordinary photograph overall, so it is probably real."
