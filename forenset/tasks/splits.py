"""splits: train / validation / test per source photo; held-out generator families only in test.

Assignment is a pure function of (build seed, source image id), so a real photo and all its
fakes share a split, adding a generator does not move other rows, and the stage maps shard by
shard (no barrier). Fakes of held-out generators whose source is not in test are left out.
Edited fakes come from the last gate of the registry (verdicts unless another gate follows
it), found when the stage is loaded, so a gate is inserted without editing this module.
With several edit generators, an instructions shard's edits are planned once every edit
generator's gate rows of it are in: identical candidates (same photo, same bytes) of different
generators are kept once, with all of them in ``generators``. The bytes belong to a held-out
family when one of it made them: in test they are kept under the first held-out generator by
name (an OOD sample), in train or validation they are dropped, so a held-out family's image
never sits in training data under an in-distribution name. Otherwise the first generator by
name keeps them. One image is never in two splits: the split is drawn per source photo, and
sources refuses a photo identical to another.

Each shard's footer counts (``footer_counts``) what the funnel and the warnings read without a
data scan: rows per split and generator, rows dropped and why, and how many of the generator's
candidates are identical to another generator's, per edit kind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Literal

import pyarrow as pa
from pydantic import field_validator

from forenset.backends.image.generator import GeneratorConfig
from forenset.confbase import Strict
from forenset.schemas.splits import SCHEMA
from forenset.seeds import derive_seed
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage, StageContext
from forenset.tasks.shared import T2I_PREFIX


class SplitsConfig(Strict):
    fractions: dict[Literal["train", "validation", "test"], float] = {
        "train": 0.6,
        "validation": 0.2,
        "test": 0.2,
    }
    holdout_families: list[str] = []  # generator families seen only in test
    include_reals: bool = True

    @field_validator("fractions")
    @classmethod
    def _fractions(cls, v: dict[str, float]) -> dict[str, float]:
        if abs(sum(v.values()) - 1.0) > 1e-6 or any(x < 0 for x in v.values()):
            raise ValueError("split fractions must be non-negative and sum to 1")
        return v


def assign_split(seed: int, image_id: str, fractions: Mapping[Any, float]) -> str:
    u = derive_seed(seed, "splits", image_id) / float(1 << 63)
    acc = 0.0
    for name in ("train", "validation", "test"):
        acc += fractions.get(name, 0.0)
        if u < acc:
            return name
    return "test"


FAKE_COLUMNS = (
    "candidate_id",
    "image_id",
    "generator",
    "generator_family",
    "blob",
    "source_blob",
    "caption",
    "instruction",
)


class _ReadsLastGate:
    """``Splits.inputs``: captions, the last gate of the registry's chain (verdicts unless a
    gate follows it, ``forenset.stages.final_gate``) and candidates, resolved when read."""

    def __get__(self, obj: object, owner: type | None = None) -> tuple[str, ...]:
        from forenset.stages import final_gate

        # an instance keeps the gate it found (the scheduler reads ``inputs`` often)
        gate = getattr(obj, "last_gate", None) or final_gate()
        return ("captions", gate, "candidates")  # candidates: text-to-image shards only


# What splits reads of the last gate: the candidate columns every gate carries, and ``keep``.
GATE_COLUMNS = FAKE_COLUMNS + ("keep", "differences")


class Splits(Stage[SplitsConfig]):
    name = "splits"
    config_model = SplitsConfig
    reads_config = ("generators",)  # the edit generators (planning)
    version = "3"
    inputs = _ReadsLastGate()
    input_columns = {
        "captions": ("image_id", "blob", "caption", "entities"),
        "candidates": FAKE_COLUMNS,
    }
    output_schema = SCHEMA
    key = "sample_id"

    def __init__(self, ctx: StageContext):
        super().__init__(ctx)
        self.last_gate: str = type(self).inputs[1]
        self._dropped: dict[str, Counter[str]] = {}  # shard id -> rows left out, by reason

    @classmethod
    def columns_of(cls, upstream: str) -> tuple[str, ...]:
        """Captions' and candidates' declared columns; of any other input (the last gate, found
        in the registry), the candidate columns and ``keep``."""
        if upstream in cls.input_columns:
            return tuple(cls.input_columns[upstream])
        return GATE_COLUMNS

    def plan(self, upstream: ShardInfo) -> list[ShardSpec]:
        if upstream.stage == "candidates" and not upstream.shard_id.startswith(T2I_PREFIX):
            return []  # edits reach splits through Edit-Check (verdicts)
        label = "real" if upstream.stage == "captions" else "fake"
        if label == "real" and not self.cfg.include_reals:
            return []
        gen = upstream.partition.get("generator", "real")
        editors = self.edit_generators()
        if upstream.stage == self.last_gate and gen in editors and len(editors) > 1:
            return self.plan_edits(upstream, editors)
        return [self.spec(f"{label}-{gen}-{upstream.shard_id}", {}, [upstream], {"label": label})]

    def edit_generators(self) -> list[str]:
        """The generators that edit every instructions shard (their verdicts share its id)."""
        return sorted(
            g.name
            for g in self.config_of("generators", list[GeneratorConfig])
            if "edit" in g.tasks()
        )

    def read_config_view(self, section: str, value: object) -> None:
        """The pool's edit generators decide how shards are planned (``plan_edits``); what that
        changes is in the shard ids and params, so the pool itself is not fingerprinted here."""
        return None

    def plan_edits(self, upstream: ShardInfo, editors: list[str]) -> list[ShardSpec]:
        """One instructions shard's edits, once every edit generator's verdicts of it are in:
        candidates of different generators with identical bytes (same photo) are kept once.

        Each generator's splits shard reads only its own verdicts; what it learned from the
        others (which of its rows are duplicates, of which generators) is in its params, so a
        new generator re-runs another's splits only where their images coincide."""
        seen = self.__dict__.setdefault("_edit_shards", {}).setdefault(upstream.shard_id, {})
        seen[upstream.partition["generator"]] = upstream
        if set(seen) < set(editors):
            return []  # the other generators' verdicts of this shard are not in yet
        infos = [seen[g] for g in editors]
        dups, twins = self.duplicates(infos)
        same = self.identical(infos)
        return [
            self.spec(
                f"fake-{g}-{upstream.shard_id}",
                {},
                [seen[g]],
                {
                    "label": "fake",
                    "generator": g,
                    "duplicates": dups.get(g, {}),
                    "holdout_twins": twins.get(g, []),
                    "identical": same.get(g, {}),
                },
            )
            for g in editors
        ]

    def _gate_rows(self, infos: list[ShardInfo]) -> dict[tuple[str, str], list[dict]]:
        """The ok candidates of the gate shards grouped by (photo, bytes)."""
        cols = ["candidate_id", "image_id", "generator", "generator_family", "blob", "keep"]
        groups: dict[tuple[str, str], list[dict]] = {}
        for info in infos:
            t = self.ctx.store.read_shard(info, columns=[*cols, "kind", "status"])
            for r in t.to_pylist():
                if r["status"] == "ok" and r["blob"]:
                    groups.setdefault((r["image_id"], r["blob"]), []).append(r)
        return groups

    def identical(self, infos: list[ShardInfo]) -> dict[str, dict[str, dict[str, int]]]:
        """generator -> {other generator: {edit kind: candidates of it identical to the other's}},
        over every judged candidate (kept or not): generators that make the same bytes are one
        generator twice, and across families a held-out split of them tests nothing."""
        out: dict[str, dict[str, Counter[str]]] = {}
        for rows in self._gate_rows(infos).values():
            for r in rows:
                for other in {o["generator"] for o in rows} - {r["generator"]}:
                    per = out.setdefault(r["generator"], {}).setdefault(other, Counter())
                    per[r.get("kind") or "unknown"] += 1
        return {g: {o: dict(sorted(k.items())) for o, k in d.items()} for g, d in out.items()}

    def duplicates(
        self, infos: list[ShardInfo]
    ) -> tuple[dict[str, dict[str, list[str]]], dict[str, list[str]]]:
        """generator -> {candidate_id: generators with identical bytes of the same photo},
        for kept candidates only; one row keeps them (it lists every generator), the others
        are dropped (they list none). Bytes a held-out family made are its own: kept under its
        first generator by name in test, dropped elsewhere; else the first generator by name
        keeps them. Also generator -> its in-distribution candidates dropped as a held-out
        family's image outside test."""
        out: dict[str, dict[str, list[str]]] = {}
        twins: dict[str, list[str]] = {}
        c = self.cfg
        for (image_id, _), every in self._gate_rows(infos).items():
            rows = [r for r in every if r["keep"]]
            if len({r["generator"] for r in rows}) < 2:
                continue
            split = assign_split(self.ctx.seed, image_id, c.fractions)
            rows.sort(key=lambda r: r["generator"])
            held = [r for r in rows if r["generator_family"] in c.holdout_families]
            if held:  # the held-out family's image: OOD in test, nowhere else
                keeper = held[0] if split == "test" else None
            else:
                keeper = rows[0]
            names = sorted({r["generator"] for r in rows})
            for r in rows:
                out.setdefault(r["generator"], {})[r["candidate_id"]] = names if r is keeper else []
                if held and not keeper and r["generator_family"] not in c.holdout_families:
                    twins.setdefault(r["generator"], []).append(r["candidate_id"])
        return out, twins

    def footer_counts(self, table: pa.Table, shard: ShardSpec) -> dict[str, int]:
        """The status counts plus what the funnel reads: ``n/<split>/<real|id|ood>/<generator>``
        rows written, ``dropped/<reason>/<generator>`` rows left out,
        ``identical/<generator>/<other>/<kind>`` candidates identical to another generator's,
        and ``holdout/<family>`` (1) per held-out family."""
        counts = self.counts(table)
        for family in self.cfg.holdout_families:  # what "OOD" means in this build
            counts[f"holdout/{family}"] = 1
        if table.num_rows:
            cols = table.select(["split", "label", "holdout", "generator", "status"]).to_pylist()
            for r in cols:
                if r["status"] != "ok":
                    continue
                part = "real" if r["label"] == "real" else ("ood" if r["holdout"] else "id")
                key = f"n/{r['split']}/{part}/{r['generator']}"
                counts[key] = counts.get(key, 0) + 1
        for key, n in self._dropped.pop(shard.shard_id, {}).items():
            counts[key] = n
        for other, kinds in (shard.params.get("identical") or {}).items():
            g = shard.params["generator"]
            for kind, n in kinds.items():
                counts[f"identical/{g}/{other}/{kind}"] = n
        return counts

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        assert shard is not None
        c = self.cfg
        out = []
        dropped: Counter[str] = Counter()
        self._dropped[shard.shard_id] = dropped
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
                        "candidate_id": None,  # a real photo: no edit, no differences
                        "instruction": None,
                        "differences": None,
                        "generators": ["real"],
                        **common,
                    }
                )
                continue
            if not r.get("keep", True):  # text-to-image rows have no Edit-Check verdict
                continue
            generators = shard.params.get("duplicates", {}).get(r["candidate_id"], [r["generator"]])
            holdout = r["generator_family"] in c.holdout_families
            if holdout and split != "test":
                dropped[f"dropped/holdout_outside_test/{r['generator']}"] += 1
                continue  # a held-out generator may not leak into training data
            if not generators:  # identical bytes to another generator's candidate
                twin = r["candidate_id"] in shard.params.get("holdout_twins", [])
                why = "identical_to_holdout" if twin else "identical"
                dropped[f"dropped/{why}/{r['generator']}"] += 1
                continue
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
                    "differences": r.get("differences"),  # text-to-image: no Edit-Check
                    "generators": generators,
                    "entities": None,  # the source photo's entities describe the real image
                    **common,
                }
            )
        return self.to_table(out)
