"""splits: train / validation / test per source photo; held-out generator families only in test.

Assignment is a pure function of (build seed, source image id), so a real photo and all its
fakes share a split, adding a generator does not move other rows, and the stage maps shard by
shard (no barrier). Fakes of held-out generators whose source is not in test are left out.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from forenset.schemas.splits import SCHEMA
from forenset.seeds import derive_seed
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage


def assign_split(seed: int, image_id: str, fractions: dict[str, float]) -> str:
    u = derive_seed(seed, "splits", image_id) / float(1 << 63)
    acc = 0.0
    for name in ("train", "validation", "test"):
        acc += fractions.get(name, 0.0)
        if u < acc:
            return name
    return "test"


class Splits(Stage):
    name = "splits"
    version = "1"
    inputs = ("captions", "verdicts", "candidates")  # candidates: text-to-image shards only
    output_schema = SCHEMA
    key = "sample_id"

    def stage_config(self) -> dict[str, Any]:
        return self.ctx.config.splits.model_dump(mode="json")

    def plan(self, upstream: ShardInfo) -> list[ShardSpec]:
        from forenset.tasks.candidates import T2I_PREFIX

        if upstream.stage == "candidates" and not upstream.shard_id.startswith(T2I_PREFIX):
            return []  # edits reach splits through Edit-Check (verdicts)
        label = "real" if upstream.stage == "captions" else "fake"
        if label == "real" and not self.ctx.config.splits.include_reals:
            return []
        gen = upstream.partition.get("generator", "real")
        return [self.spec(f"{label}-{gen}-{upstream.shard_id}", {}, [upstream], {"label": label})]

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        assert shard is not None
        c = self.ctx.config.splits
        out = []
        for r in batch.to_pylist():
            split = assign_split(self.ctx.seed, r["image_id"], c.fractions)
            common = {
                "split": split,
                "status": "ok",
                "backend": "rules",
                "stage_version": self.version,
                "elapsed_ms": 0.0,
            }
            if shard.params["label"] == "real":
                out.append(
                    {
                        "sample_id": r["image_id"],
                        "label": "real",
                        "image_id": r["image_id"],
                        "generator": "real",
                        "generator_family": "real",
                        "holdout": False,
                        "blob": r["blob"],
                        "source_blob": r["blob"],
                        "caption": r["caption"],
                        "entities": r["entities"],
                        **common,
                    }
                )
                continue
            if not r.get("keep", True):  # text-to-image rows have no Edit-Check verdict
                continue
            holdout = r["generator_family"] in c.holdout_families
            if holdout and split != "test":
                continue  # a held-out generator may not leak into training data
            out.append(
                {
                    "sample_id": r["candidate_id"],
                    "label": "fake",
                    "image_id": r["image_id"],
                    "candidate_id": r["candidate_id"],
                    "generator": r["generator"],
                    "generator_family": r["generator_family"],
                    "holdout": holdout,
                    "blob": r["blob"],
                    "source_blob": r["source_blob"],
                    "caption": r["caption"],
                    "instruction": r["instruction"],
                    "differences": r.get("differences"),
                    **common,
                }
            )
        return self.to_table(out)


class SplitPartitioned(Stage):
    """Base for stages that map over splits shards, one output shard per split value."""

    inputs = ("splits",)
    partition_by = ("split",)

    def plan(self, upstream: ShardInfo) -> list[ShardSpec]:
        t = self.ctx.store.read_shard(upstream, columns=["split", "status"])
        values = sorted(
            {
                s
                for s, st in zip(t["split"].to_pylist(), t["status"].to_pylist(), strict=True)
                if st == "ok"
            }
        )
        return [
            self.spec(upstream.shard_id, {"split": v}, [upstream], {"split": v}) for v in values
        ]

    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        import pyarrow.compute as pc

        t = super().read_inputs(shard)
        return t.filter(pc.equal(t["split"], shard.params["split"]))
