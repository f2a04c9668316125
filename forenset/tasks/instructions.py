"""instructions: 2–4 targeted edits per image, each naming a target region (offline: rule-based)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa

from forenset.backends.offline_vision import position_name
from forenset.schemas.instructions import SCHEMA
from forenset.seeds import rng_for
from forenset.tasks.base import ShardSpec, Stage, dumps

FAMILY = {
    "copy_move": "object",
    "removal": "object",
    "splice": "object",
    "recolor": "object",
    "local_warp": "geometry",
    "liquify": "geometry",
    "lighting": "scene",
}
BASE_DIFFICULTY = {
    "splice": 2,
    "recolor": 2,
    "copy_move": 3,
    "removal": 3,
    "local_warp": 4,
    "liquify": 4,
    "lighting": 4,
}
COLOURS = ["red", "blue", "green", "yellow", "purple", "orange", "cyan"]
LOCAL_MAX_AREA = 0.3


def area(b: list[float]) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def difficulty(kind: str, box: list[float]) -> int:
    """Harder to spot when the change is small; easier when it is large."""
    a = area(box)
    d = BASE_DIFFICULTY[kind] + (1 if a < 0.02 else 0) - (1 if a > 0.15 else 0)
    return int(np.clip(d, 1, 5))


def free_box(src: list[float], rng: np.random.Generator) -> list[float]:
    """A same-size box that overlaps the source as little as possible (copy-move target)."""
    w, h = src[2] - src[0], src[3] - src[1]
    best, best_ov = src, 2.0
    for _ in range(24):
        x0, y0 = rng.uniform(0, max(1e-6, 1 - w)), rng.uniform(0, max(1e-6, 1 - h))
        cand = [x0, y0, x0 + w, y0 + h]
        ov = area(
            [max(src[0], cand[0]), max(src[1], cand[1]), min(src[2], cand[2]), min(src[3], cand[3])]
        )
        if ov < best_ov:
            best, best_ov = cand, ov
        if ov == 0:
            break
    return [round(float(v), 4) for v in best]


def make_instruction(
    kind: str, ent: dict[str, Any], rng: np.random.Generator, donor: dict[str, Any] | None
) -> dict[str, Any]:
    t, b = ent["name"], [float(v) for v in ent["bbox"]]
    loc = position_name((b[0] + b[2]) / 2, (b[1] + b[3]) / 2)
    change, params = b, {}
    if kind == "recolor":
        col = str(rng.choice(COLOURS))
        params = {"colour": col}
        text, exp = f"Change the colour of the {t} at the {loc} to {col}.", f"the {t} appears {col}"
    elif kind == "removal":
        text, exp = (
            f"Remove the {t} at the {loc} and fill the area with its surroundings.",
            f"the {t} is gone",
        )
    elif kind == "copy_move":
        change = free_box(b, rng)
        dloc = position_name((change[0] + change[2]) / 2, (change[1] + change[3]) / 2)
        text = f"Duplicate the {t} from the {loc} and place the copy at the {dloc}."
        exp = f"a second {t} appears at the {dloc}"
    elif kind == "splice":
        assert donor is not None
        w, h = (
            min(0.4, donor["bbox"][2] - donor["bbox"][0]),
            min(0.4, donor["bbox"][3] - donor["bbox"][1]),
        )
        x0, y0 = rng.uniform(0, 1 - w), rng.uniform(0, 1 - h)
        change = [round(float(v), 4) for v in (x0, y0, x0 + w, y0 + h)]
        dloc = position_name(x0 + w / 2, y0 + h / 2)
        params = {
            "donor_image_id": donor["image_id"],
            "donor_blob": donor["blob"],
            "donor_bbox": donor["bbox"],
            "donor_entity": donor["name"],
        }
        text = (
            f"Insert a {donor['name']} taken from another photograph at the {dloc}, over the {t}."
        )
        exp = f"a {donor['name']} appears at the {dloc}"
        t = donor["name"]
        loc = dloc
    elif kind == "local_warp":
        text, exp = (
            f"Skew the {t} at the {loc} with a local perspective warp.",
            f"the {t} looks tilted",
        )
    elif kind == "liquify":
        mode = str(rng.choice(["bulge", "pinch"]))
        params = {"mode": mode}
        verb = "Enlarge" if mode == "bulge" else "Shrink"
        text, exp = (
            f"{verb} the centre of the {t} at the {loc} with a smooth deformation.",
            f"the {t} is deformed",
        )
    elif kind == "lighting":
        gain = float(rng.choice([0.5, -0.45]))
        params = {"gain": gain}
        word = "Brighten" if gain > 0 else "Darken"
        text, exp = (
            f"{word} the light falling on the {t} at the {loc}.",
            f"the {t} is {'brighter' if gain > 0 else 'darker'}",
        )
    else:  # pragma: no cover - guarded by config validation
        raise ValueError(kind)
    return {
        "text": text,
        "family": FAMILY[kind],
        "kind": kind,
        "target": t,
        "location_hint": loc,
        "bbox": [round(v, 4) for v in b],
        "change_bbox": change,
        "expected_change": exp,
        "difficulty": difficulty(kind, change),
        "params": dumps(params),
    }


class Instructions(Stage):
    name = "instructions"
    version = "1"
    inputs = ("captions",)
    input_columns = ("image_id", "blob", "caption", "entities")
    output_schema = SCHEMA
    key = "instruction_id"

    def stage_config(self) -> dict[str, Any]:
        return self.ctx.config.instructions.model_dump(mode="json")

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        """Batch-level: splicing draws its donor from another photo of the same shard."""
        cfg = self.ctx.config.instructions
        rows = batch.to_pylist()
        kinds = [k for k, w in cfg.kinds.items() if w > 0]
        weights = np.array([cfg.kinds[k] for k in kinds], dtype=float)
        out = []
        for i, row in enumerate(rows):
            rng = rng_for(self.ctx.seed, self.name, row["image_id"])
            ents = [e for e in json.loads(row["entities"] or "[]") if area(e["bbox"]) > 0.002]
            local = [e for e in ents if area(e["bbox"]) <= LOCAL_MAX_AREA] or ents
            others = [r for j, r in enumerate(rows) if j != i]
            n = int(rng.integers(cfg.min_edits, cfg.max_edits + 1))
            p = weights / weights.sum()
            chosen = list(rng.choice(kinds, size=min(n, len(kinds)), replace=False, p=p))
            if not local:
                out.append(
                    {
                        "instruction_id": f"{row['image_id']}-i0",
                        "image_id": row["image_id"],
                        "status": "error",
                        "error": "no target region found in the caption entities or image",
                        "retryable": False,
                        "backend": "offline",
                        "stage_version": self.version,
                    }
                )
                continue
            for idx, kind in enumerate(chosen):
                ent = (
                    local[int(rng.integers(len(local)))]
                    if kind != "lighting"
                    else ents[int(rng.integers(len(ents)))]
                )
                donor = None
                if kind == "splice":
                    if not others:
                        kind = "copy_move"
                    else:
                        o = others[int(rng.integers(len(others)))]
                        oents = [
                            e
                            for e in json.loads(o["entities"] or "[]")
                            if 0.005 < area(e["bbox"]) <= LOCAL_MAX_AREA
                        ]
                        if not oents:
                            kind = "copy_move"
                        else:
                            e = oents[int(rng.integers(len(oents)))]
                            donor = {"image_id": o["image_id"], "blob": o["blob"], **e}
                ins = make_instruction(kind, ent, rng, donor)
                out.append(
                    {
                        "instruction_id": f"{row['image_id']}-i{idx}",
                        "image_id": row["image_id"],
                        "blob": row["blob"],
                        "caption": row["caption"],
                        "idx": idx,
                        **ins,
                        "status": "ok",
                        "backend": "offline",
                        "model": "rules-v1",
                        "seed": int(rng.integers(2**62)),
                        "stage_version": self.version,
                        "elapsed_ms": 0.0,
                    }
                )
        return self.to_table(out)
