"""reward_triplets: (image, response A, response B) triplets for judging (§3.2 "Pairing").

``triplets_per_image`` triplets per image (the paper: 3), pairs drawn round-robin: images in a
seeded order, and for each the pairs of policies that answered it taken least-used first (then
the pair whose policies answered the fewest images, then the pair whose policies were used
least, then a seeded draw). With every policy answering every
image, each pair recurs equally often, so every policy appears equally often and meets every
other; a policy that answered only some images (a human baseline) is paired first where it can
be. The two responses' order is scrambled per triplet (``swapped``: shown in reverse name order)
and the triplets' presentation order is scrambled (``position``), as the paper sent them out.

With ``reward.release`` the triplets are the release's annotation records instead (no pairing:
the shown order is the record's, ``caption_1`` first; ``position`` the records' sorted order);
a record without ``image_id``, ``csv1`` or ``csv2`` is an error row.
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations
from typing import Any

import pyarrow as pa

from forenset.benchmarks.reward.config import RewardConfig
from forenset.benchmarks.reward.schemas.reward_triplets import SCHEMA
from forenset.benchmarks.reward.stages.release_input import release_config, release_rows
from forenset.seeds import derive_seed
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage

SHARD = "triplets"


def round_robin(
    answered: dict[str, list[str]], per_image: int, seed: int
) -> list[tuple[str, tuple[str, str]]]:
    """(image, (policy, policy)) pairs: for each image in a seeded order, ``per_image`` pairs of
    the policies that answered it, least-used pair first (module docstring)."""
    pair_n: Counter[tuple[str, str]] = Counter()
    pol_n: Counter[str] = Counter()
    coverage = Counter(p for ps in answered.values() for p in ps)  # images each policy answered
    out = []
    for image in sorted(answered, key=lambda i: (derive_seed(seed, "pairing", i), i)):
        cands = list(combinations(sorted(answered[image]), 2))
        for _ in range(min(per_image, len(cands))):
            best = min(
                cands,
                key=lambda pq: (
                    pair_n[pq],
                    coverage[pq[0]] + coverage[pq[1]],  # a policy with few answers first
                    pol_n[pq[0]] + pol_n[pq[1]],
                    derive_seed(seed, "pairing", image, *pq),
                ),
            )
            cands.remove(best)
            pair_n[best] += 1
            pol_n.update(best)
            out.append((image, best))
    return out


class RewardTriplets(Stage[RewardConfig]):
    name = "reward_triplets"
    version = "1"
    inputs = ("reward_responses",)
    input_columns = (
        "response_id", "policy", "reward_image_id", "image_id", "generator", "label", "blob",
        "reply",
    )  # fmt: skip
    output_schema = SCHEMA
    key = "triplet_id"
    config_key = "reward"
    gather = True

    def stage_config(self) -> Any:
        c: RewardConfig = self.cfg
        return release_config(self) or {"triplets_per_image": c.triplets_per_image}

    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        if not self.cfg.enabled or not upstream:
            return []
        return [self.spec(SHARD, {}, upstream, {})]

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        if self.cfg.release is not None:
            return self.from_release()
        by_image: dict[str, dict[str, dict[str, Any]]] = {}
        for r in batch.to_pylist():
            by_image.setdefault(r["reward_image_id"], {})[r["policy"]] = r
        answered = {i: list(ps) for i, ps in by_image.items() if len(ps) >= 2}
        seed = self.ctx.seed
        pairs = round_robin(answered, self.cfg.triplets_per_image, seed)
        out = []
        k: Counter[str] = Counter()
        for image, (a, b) in pairs:
            tid = f"{image}#{k[image]}"
            k[image] += 1
            swapped = bool(derive_seed(seed, self.name, tid, "order") & 1)
            first, second = (b, a) if swapped else (a, b)
            ra, rb = by_image[image][first], by_image[image][second]
            out.append(
                {
                    "triplet_id": tid,
                    **{
                        c: ra[c]
                        for c in ("reward_image_id", "image_id", "generator", "label", "blob")
                    },
                    "pair": f"{a}|{b}",
                    "first_policy": first,
                    "second_policy": second,
                    "first_response_id": ra["response_id"],
                    "second_response_id": rb["response_id"],
                    "first_reply": ra["reply"],
                    "second_reply": rb["reply"],
                    "swapped": swapped,
                    "backend": "rules",
                    "model": "round-robin",
                    "seed": seed,
                    "status": "ok",
                    "stage_version": self.version,
                    "elapsed_ms": 0.0,
                }
            )
        order = sorted(
            out,
            key=lambda r: (
                derive_seed(seed, self.name, "position", r["triplet_id"]),
                r["triplet_id"],
            ),
        )
        for pos, r in enumerate(order):
            r["position"] = pos
        return self.to_table(out)

    def from_release(self) -> pa.Table:
        rows = release_rows(self, self.name)
        for pos, r in enumerate(rows):
            r.update(backend="release", model="annotation-records", stage_version=self.version)
            if r["status"] == "ok":
                r.update(position=pos, seed=self.ctx.seed, elapsed_ms=0.0, blob=None,
                         generator=None)  # fmt: skip
        return self.to_table(rows)
