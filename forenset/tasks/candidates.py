"""candidates: edited images, one shard per (instructions shard, generator), partitioned by generator.

A generator's shard fingerprint covers only that generator's config, so adding one to the pool
adds its partitions and leaves every other generator's images untouched.
"""

from __future__ import annotations

import io
import json
from typing import Annotated, Any

import pyarrow as pa
from PIL import Image
from pydantic import AfterValidator

from forenset.backends.image import factory
from forenset.backends.image.base import EditRequest, GenerateRequest, ImageBackend, ImageResult
from forenset.backends.image.generator import GeneratorConfig
from forenset.confbase import repeated
from forenset.errors import ConfigurationError
from forenset.images import encode_png
from forenset.schemas.candidates import SCHEMA
from forenset.seeds import derive_seed
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage, dumps
from forenset.tasks.shared import T2I_PREFIX

EDIT_FIELDS = (
    "text",
    "family",
    "kind",
    "target",
    "location_hint",
    "bbox",
    "change_bbox",
    "expected_change",
    "difficulty",
    "params",
)


def backend_for(cfg: GeneratorConfig) -> ImageBackend:
    """The process's backend for ``cfg``, built once by the factory (it may hold a model)."""
    return factory.shared(cfg)


PROMPT_FIELDS = ("prompt_uid", "prompt", "category", "scenario_id", "media_form", "fields")


def _unique_names(generators: list[GeneratorConfig]) -> list[GeneratorConfig]:
    names = [g.name for g in generators]
    dup = repeated(names)
    if dup:
        raise ValueError(f"generator names must be unique (repeated: {', '.join(dup)})")
    return generators


# The stage's config: the generator pool (``generators:`` in YAML).
GeneratorPool = Annotated[list[GeneratorConfig], AfterValidator(_unique_names)]


class Candidates(Stage[list[GeneratorConfig]]):
    """Edits (instructions x edit generators), text-to-image images (prompts x t2i generators)
    and imported edits made elsewhere (captioned photos x ``external`` generators)."""

    name = "candidates"
    version = "3"  # 3: the classical removal fills its whole box (it left the object's corners)
    inputs = ("instructions", "prompts", "captions")
    input_columns = {
        "instructions": ("instruction_id", "image_id", "blob", "caption") + EDIT_FIELDS,
        "prompts": PROMPT_FIELDS + ("scenario",),
        "captions": ("image_id", "blob", "caption"),
    }
    config_model = GeneratorPool
    config_key = "generators"
    config_default = [GeneratorConfig(name="cv-telea")]
    output_schema = SCHEMA
    key = "candidate_id"
    partition_by = ("generator",)

    def plan(self, upstream: ShardInfo) -> list[ShardSpec]:
        task = {"prompts": "t2i", "captions": "import"}.get(upstream.stage, "edit")
        prefix = T2I_PREFIX if task == "t2i" else ""
        specs = []
        for g in self.cfg:
            mode = task  # an importing generator (external edits) reads the captioned photos
            if mode not in g.tasks():
                continue
            extra = {}
            if mode == "import":  # a changed listing recomputes the imports
                from forenset.backends.image.external import listing_id

                extra["listing"] = listing_id(g)
            specs.append(
                self.spec(
                    prefix + upstream.shard_id,
                    {"generator": g.name},
                    [upstream],
                    {
                        "generator": g.model_dump(mode="json"),
                        "task": mode,
                        "fingerprint": g.fingerprint(),
                        **extra,
                    },
                )
            )
        return specs

    def stage_config(self) -> dict[str, Any]:
        """Nothing pool-wide: each shard's params carry its own generator's fingerprint, so
        adding a generator leaves the other generators' shards untouched."""
        return {}

    def spec(
        self,
        shard_id: str,
        partition: dict[str, str],
        inputs: list[ShardInfo],
        params: dict[str, Any],
        config: Any = None,
    ) -> ShardSpec:
        """Fingerprint the generator's pixel-shaping config, not its operational knobs."""
        fp_params = {k: v for k, v in params.items() if k != "generator"}
        spec = super().spec(shard_id, partition, inputs, fp_params, config)
        spec.params = params
        return spec

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        assert shard is not None, "candidates needs its shard (which generator)"
        try:
            if shard.params.get("task") == "t2i":
                return self.generate(batch, shard)
            if shard.params.get("task") == "import":
                return self.imported(batch, shard)
            return self.edit(batch, shard)
        except ConfigurationError as e:  # name the generator: the user fixes it in its block
            raise ConfigurationError(f"generator {shard.partition['generator']}: {e}") from None

    def generate(self, batch: pa.Table, shard: ShardSpec) -> pa.Table:
        gcfg = GeneratorConfig.model_validate(shard.params["generator"])
        backend = backend_for(gcfg)
        rows = batch.to_pylist()
        seeds = [derive_seed(self.ctx.seed, self.name, gcfg.name, r["prompt_uid"]) for r in rows]
        reqs = [
            GenerateRequest(r["prompt"], seed, gcfg.t2i_size, item_id=r["prompt_uid"])
            for r, seed in zip(rows, seeds, strict=True)
        ]
        out = []
        for r, seed, res in zip(rows, seeds, backend.generate(reqs), strict=True):
            provenance = {
                k: r.get(k) for k in ("category", "scenario_id", "media_form", "fields", "scenario")
            }
            base = {
                "candidate_id": f"{r['prompt_uid']}-{gcfg.name}",
                "instruction_id": None,  # text-to-image: no instruction, no source photo
                "source_blob": None,
                "image_id": r["prompt_uid"],
                "generator": gcfg.name,
                "generator_family": gcfg.family,
                "caption": r["prompt"],
                "instruction": dumps(provenance),
                "kind": "t2i",
                "family": str(r.get("category")),
            }
            out.append(self.result_row(base, res, backend.name, gcfg, seed))
        return self.to_table(out)

    def result_row(
        self, base: dict[str, Any], res: ImageResult, backend: str, gcfg: GeneratorConfig, seed: int
    ) -> dict[str, Any]:
        """One candidate row from a backend result: the image as a blob, or the error with its reason."""
        row = {
            **base,
            "backend": backend,
            "model": res.model or gcfg.model,
            "seed": seed,
            "stage_version": self.version,
            "latency_s": res.latency_s,
            "elapsed_ms": res.latency_s * 1000,
        }
        if res.status != "ok" or res.image is None:
            return {
                **row,
                "status": "error",
                "error": res.error or "generator returned no image",
                "retryable": res.retryable,
            }
        return {
            **row,
            "status": "ok",
            "blob": self.ctx.store.put_blob(
                res.png if res.png is not None else encode_png(res.image)
            ),
            "width": res.image.width,
            "height": res.image.height,
            "params": dumps(res.params),
            "truth": dumps(res.truth),
        }

    def edit(self, batch: pa.Table, shard: ShardSpec) -> pa.Table:
        gcfg = GeneratorConfig.model_validate(shard.params["generator"])
        backend = backend_for(gcfg)
        kinds = gcfg.edit_kinds()  # an instruction goes only to generators that can execute it
        rows = [r for r in batch.to_pylist() if r["kind"] in kinds]
        store = self.ctx.store
        reqs, metas = [], []
        for r in rows:
            ins = {k: r[k] for k in EDIT_FIELDS}
            ins["params"] = json.loads(r["params"] or "{}")
            donor = None
            if ins["params"].get("donor_blob"):
                donor = Image.open(io.BytesIO(store.get_blob(ins["params"]["donor_blob"])))
            seed = derive_seed(self.ctx.seed, self.name, gcfg.name, r["instruction_id"])
            img = Image.open(io.BytesIO(store.get_blob(r["blob"])))
            reqs.append(EditRequest(img, ins, seed, donor=donor, item_id=r["instruction_id"]))
            metas.append((r, ins, seed))
        results = backend.edit(reqs)
        out = []
        for (r, ins, seed), res in zip(metas, results, strict=True):
            base = {
                "candidate_id": f"{r['instruction_id']}-{gcfg.name}",
                "instruction_id": r["instruction_id"],
                "image_id": r["image_id"],
                "generator": gcfg.name,
                "generator_family": gcfg.family,
                "source_blob": r["blob"],
                "caption": r["caption"],
                "instruction": dumps(ins),
                "kind": ins["kind"],
                "family": ins["family"],
            }
            out.append(self.result_row(base, res, backend.name, gcfg, seed))
        return self.to_table(out)

    def imported(self, batch: pa.Table, shard: ShardSpec) -> pa.Table:
        """Edits made elsewhere (an ``external`` generator) of this shard's photos, resized to
        the normalised source photo; bad rows are error rows with the backend's reason."""
        gcfg = GeneratorConfig.model_validate(shard.params["generator"])
        backend = backend_for(gcfg)
        photos: dict[str, dict[str, Any]] = {}
        for r in batch.to_pylist():
            photos.setdefault(r["image_id"], r)
        out = []
        for image_id, rec, res in backend.imports(list(photos)):  # type: ignore[attr-defined]
            photo = photos[image_id]
            ins = external_instruction(rec)
            instruction_id = f"{image_id}-x{rec['row']}"
            base = {
                "candidate_id": f"{instruction_id}-{gcfg.name}",
                "instruction_id": instruction_id,
                "image_id": image_id,
                "generator": gcfg.name,
                "generator_family": gcfg.family,
                "source_blob": photo["blob"],
                "caption": photo["caption"],
                "instruction": dumps(ins),
                "kind": ins["kind"],
                "family": ins["family"],
            }
            if res.image is not None:
                src = Image.open(io.BytesIO(self.ctx.store.get_blob(photo["blob"])))
                if res.image.size != src.size:
                    res.image = res.image.resize(src.size, Image.Resampling.LANCZOS)
            seed = derive_seed(self.ctx.seed, self.name, gcfg.name, instruction_id)
            out.append(self.result_row(base, res, backend.name, gcfg, seed))
        return self.to_table(out)


def external_instruction(rec: dict[str, Any]) -> dict[str, Any]:
    """The edit record of an imported edit: its instruction text, and the kind and target when
    the listing names them. Without a listed box the change region is the whole frame (the
    rule judge then sees no off-target area and rates a small edit as partial); kind and family
    are 'external' unless the listing names a kind (another listed word is kept as
    ``params.listed_kind``)."""
    from forenset.text.models import ALL_KINDS, FAMILY_KINDS

    kind = rec.get("kind") if rec.get("kind") in ALL_KINDS else "external"
    order = ("object", "geometry", "scene", "person")  # a person-only kind names a person edit
    family = next((f for f in order if kind in FAMILY_KINDS[f]), "external")
    text = rec.get("instruction") or ""
    box = list(rec.get("bbox") or FULL_FRAME)
    return {
        "text": text,
        "family": family,
        "kind": kind,
        "target": rec.get("target") or "edited area",
        "location_hint": "full frame" if box == list(FULL_FRAME) else "listed box",
        "bbox": box,
        "change_bbox": box,
        "expected_change": text,
        "difficulty": 3,
        "params": {
            "external_generator": rec.get("generator"),
            "row": rec.get("row"),
            # a listed kind forenset has no instruction kind for (e.g. 'blur'): Edit-Check's
            # strength rules can still name the change it needs
            **({"listed_kind": rec["kind"]} if rec.get("kind") and kind == "external" else {}),
        },
    }


FULL_FRAME = (0.0, 0.0, 1.0, 1.0)
