"""eval_sets: the ID and OOD evaluation sets of the XPlainVerse protocol (App. 16).

ID fakes come from generator families represented in training, OOD fakes from held-out
families (``splits.holdout_families``), both with real photos, all from one split (the test
split by default). The paper's sets hold 10,000 fakes and 8,500 reals each; ``fakes`` and
``reals`` scale that down. When a split holds fewer samples than asked, both counts shrink by
the same factor so the fake:real composition stays the paper's (``keep_composition``). The draw
is a seeded ranking of sample ids, so a larger set contains the smaller one and a rebuild draws
the same samples. Planned once from every splits shard (a gathering stage).

``propagation`` (levels 0-3, default ``[0]``: clean only) adds, for each drawn sample and each
level above 0, one more item of the same sample whose image went through ``level`` re-sharing
rounds (:func:`forenset.perturbations.propagation.propagate`: resize, sharpen, JPEG), seeded by
the build seed, the set, the sample and the level. ``variant`` names the level ("0x" … "3x",
the "network propagation" levels of SafeIMG §3.4) so the scores can be split by it; a level-0
item keeps the id ``<eval_set>/<sample_id>``, a propagated one is ``<eval_set>/<sample_id>@<level>x``.

``perturbations`` (``families`` of the catalogue, ``forenset.perturbations``; none by default)
adds, for each drawn sample, each family and each ``severities`` value, one more item of the
same sample with one op of that family applied at that severity (0 = the easy end of every
numeric parameter, 1 = the hard end: ``forenset.perturbations.registry.sev_field``). The op,
its categorical choices and its noise are drawn once per (set, sample, family), so the items of
one sample and family differ only by severity. ``variant`` is ``<family>:<severity>``
(``noise:0.5``), the id ``<eval_set>/<sample_id>@<family>:<severity>``; ``perturbation_family``,
``severity`` and ``ops`` (the replayable record) say what was applied. The scores are split per
family and per family and severity (``eval_scores``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa

from forenset.benchmarks.evaluation.config import (
    EVAL_SETS,
    EvaluationConfig,
    perturbed_variant,
)
from forenset.benchmarks.evaluation.schemas.eval_sets import SCHEMA
from forenset.confbase import fingerprint_view
from forenset.errors import resource_exhausted, transient
from forenset.images import decode_rgb, encode_png
from forenset.perturbations.propagation import propagate
from forenset.seeds import derive_seed
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ContractError, ShardSpec, Stage, describe, writable


def variant_name(level: int) -> str:
    """The variant label of a propagation level: 0 -> "0x" (clean), 2 -> "2x"."""
    return f"{level}x"


def eval_item_id(eval_set: str, sample_id: str, level: int) -> str:
    """``<eval_set>/<sample_id>`` for the clean item (level 0), ``…@<level>x`` otherwise."""
    base = f"{eval_set}/{sample_id}"
    return base if level == 0 else f"{base}@{variant_name(level)}"


def draw(
    candidates: list[dict[str, Any]], n: int, seed: int, eval_set: str
) -> list[dict[str, Any]]:
    """The first ``n`` of a seeded ranking (ties cannot depend on input order)."""
    ranked = sorted(
        candidates,
        key=lambda r: (derive_seed(seed, "eval_sets", eval_set, r["sample_id"]), r["sample_id"]),
    )
    return ranked[:n]


def set_sizes(avail_fake: int, avail_real: int, cfg: EvaluationConfig) -> tuple[int, int]:
    """(fakes, reals) to draw: the asked counts, scaled down together when the split is short.

    Scaling rounds down, but never to zero when a class was asked for and is available: a set
    of one class cannot measure F1 or real-image accuracy (4 fakes : 1 real with 2 fakes at
    hand scaled to 2 : 0 and the set lost its reals), so each class keeps at least one. A class
    asked for and absent leaves the set empty (no one-class set)."""
    if not cfg.keep_composition:
        return min(avail_fake, cfg.fakes), min(avail_real, cfg.reals)
    if avail_fake == 0 or (cfg.reals and avail_real == 0):
        return 0, 0
    scale = min(1.0, avail_fake / cfg.fakes, avail_real / cfg.reals if cfg.reals else 1.0)
    n_fake = math.floor(cfg.fakes * scale + 1e-9)
    n_real = math.floor(cfg.reals * scale + 1e-9)
    return max(n_fake, 1), max(n_real, min(1, cfg.reals))


class EvalSets(Stage[EvaluationConfig]):
    name = "eval_sets"
    version = "4"  # 4: a scaled-down set keeps at least one item of each class asked for
    inputs = ("splits",)
    input_columns = (
        "sample_id", "label", "image_id", "generator", "generator_family", "holdout", "split",
        "blob",
    )  # fmt: skip
    output_schema = SCHEMA
    key = "eval_item_id"
    partition_by = ("eval_set",)
    config_model = EvaluationConfig
    config_key = "evaluation"
    gather = True

    # The fields that decide which samples are drawn; detectors, tracks and scorers belong to
    # the later evaluation stages, so changing a detector does not redraw the sets.
    SET_FIELDS = (
        "enabled", "split", "fakes", "reals", "keep_composition", "propagation", "perturbations",
    )  # fmt: skip

    def stage_config(self) -> Any:
        view = fingerprint_view(self.cfg)
        return {k: view[k] for k in self.SET_FIELDS}

    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        if not self.cfg.enabled or not upstream:
            return []
        return [self.spec(s, {"eval_set": s}, upstream, {"eval_set": s}) for s in EVAL_SETS]

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        assert shard is not None
        c: EvaluationConfig = self.cfg
        eval_set = shard.params["eval_set"]
        rows = [r for r in batch.to_pylist() if r["split"] == c.split]
        reals = [r for r in rows if r["label"] == "real"]
        held_out = eval_set == "ood"
        fakes = [r for r in rows if r["label"] == "fake" and bool(r["holdout"]) == held_out]
        n_fake, n_real = set_sizes(len(fakes), len(reals), c)
        chosen = draw(fakes, n_fake, self.ctx.seed, eval_set) + draw(
            reals, n_real, self.ctx.seed, eval_set
        )
        out = []
        for rank, r in enumerate(chosen):
            for level in c.propagation:
                out.append(self.item(eval_set, r, rank, level))
            for family in c.perturbations.families:
                out.extend(self.perturbed_items(eval_set, r, rank, family))
        return self.to_table(out)

    def perturbed_items(
        self, eval_set: str, r: dict[str, Any], rank: int, family: str
    ) -> list[dict[str, Any]]:
        """The items of sample ``r`` under one op of ``family`` at each severity (module doc);
        error rows with the reason when no op is admitted or applying it fails."""
        import json

        from forenset.perturbations import PerturbationConfig, apply_record, op_pool
        from forenset.perturbations.mixture import _overrides
        from forenset.seeds import rng_for

        c: EvaluationConfig = self.cfg
        pc = c.perturbations
        seed = derive_seed(self.ctx.seed, "eval_sets", eval_set, r["sample_id"], family)
        cat = PerturbationConfig(include=pc.include)
        pool = [op for op in op_pool(c.split, cat) if op.family == family]
        rng = rng_for(seed, "op")
        op = pool[int(rng.integers(len(pool)))] if pool else None
        clean: Any = None
        out = []
        for sev in pc.severities:
            variant = perturbed_variant(family, sev)
            row = {
                **{k: r[k] for k in self.columns_of("splits")},
                "eval_item_id": f"{eval_set}/{r['sample_id']}@{variant}",
                "eval_set": eval_set,
                "variant": variant,
                "propagation": 0,
                "perturbation_family": family,
                "severity": sev,
                "rank": rank,
                "seed": seed,
                "stage_version": self.version,
                "elapsed_ms": 0.0,
            }
            try:
                if op is None:
                    raise ValueError(
                        f"no op of family {family} is admitted in the {c.split} split"
                        + (" among perturbations.include" if pc.include is not None else "")
                    )
                prng = rng_for(seed, "params")
                params = op.sample_params(
                    c.split, prng, (sev, sev), _overrides(op, c.split, prng, cat)
                )
                record = {
                    "schedule": "single",
                    "ops": [
                        {
                            "name": op.name,
                            "family": family,
                            "params": params.model_dump(mode="json"),
                        }
                    ],
                    "seed": seed,
                }
                if clean is None:
                    clean = decode_rgb(self.ctx.store.get_blob(r["blob"]))
                img = apply_record(clean, record)
                blob = self.ctx.store.put_blob(encode_png(img))
            except ContractError:
                raise
            except Exception as e:  # noqa: BLE001 - one bad image must not fail the set
                if resource_exhausted(e):  # a full disk: the shard fails and is redone
                    raise
                msg = f"perturbation {variant} failed: {describe(e)}"
                out.append(
                    {**row, "blob": None, "backend": "offline", "status": "error",
                     "error": writable(msg), "retryable": transient(e)}
                )  # fmt: skip
                continue
            out.append(
                {**row, "blob": blob, "ops": json.dumps(record["ops"], sort_keys=True),
                 "backend": "offline", "model": "perturbation-catalogue", "status": "ok"}
            )  # fmt: skip
        return out

    def item(self, eval_set: str, r: dict[str, Any], rank: int, level: int) -> dict[str, Any]:
        """The eval item of sample ``r`` at propagation ``level`` (its image propagated and
        stored for a level above 0; an error row when that fails)."""
        row = {
            **{k: r[k] for k in self.columns_of("splits")},
            "eval_item_id": eval_item_id(eval_set, r["sample_id"], level),
            "eval_set": eval_set,
            "variant": variant_name(level),
            "propagation": level,
            "perturbation_family": None,
            "severity": None,
            "ops": None,
            "rank": rank,
            "backend": "rules",
            "stage_version": self.version,
            "elapsed_ms": 0.0,
        }
        if level == 0:
            return {**row, "status": "ok"}
        seed = derive_seed(self.ctx.seed, "eval_sets", eval_set, r["sample_id"], level)
        try:
            clean = decode_rgb(self.ctx.store.get_blob(r["blob"]))
            img = propagate(clean, level, np.random.default_rng(seed))
            blob = self.ctx.store.put_blob(encode_png(img))
        except ContractError:
            raise
        except Exception as e:  # noqa: BLE001 - one bad image must not fail the set
            if resource_exhausted(e):  # a full disk: the shard fails and is redone
                raise
            msg = f"propagation {variant_name(level)} failed: {describe(e)}"
            err = {"status": "error", "error": writable(msg), "retryable": True}
            return {**row, "blob": None, **err}
        return {**row, "blob": blob, "seed": seed, "backend": "offline", "status": "ok"}
