"""Edit instructions (XPlainVerse step 1): config, validation, difficulty rule, offline generator.

The offline generator turns caller-computed image regions into 2-4 concrete, typed edits that the
offline manipulation backend can execute; the validator checks LLM-written (or any) instruction
sets and returns failure reasons so the caller can regenerate.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, ValidationError, field_validator

from forenset.text.lexicon import contains_term, content_lemmas, lemmas
from forenset.text.models import FAMILY_KINDS, EditInstruction

FAMILIES: tuple[str, ...] = ("person", "object", "geometry", "scene")
# What the offline manipulation backend can execute, and the families each can belong to.
OFFLINE_KINDS: dict[str, tuple[str, ...]] = {
    "copy_move": ("object",),
    "removal": ("object",),
    "splice": ("object",),
    "recolor": ("object", "person"),
    "local_warp": ("geometry",),
    "liquify": ("geometry", "person"),
    "lighting": ("scene",),
}
INSERTION_KINDS = frozenset({"insertion", "splice"})  # the target is new: no caption grounding
PERSON_BODY_KINDS = frozenset({"liquify", "pose", "attribute", "local_warp", "clothing"})

DEFAULT_BLOCKED: tuple[str, ...] = (
    "weapon",
    "gun",
    "pistol",
    "rifle",
    "firearm",
    "grenade",
    "bomb",
    "explosive",
    "blood",
    "gore",
    "wound",
    "corpse",
    "dead body",
    "nude",
    "naked",
    "nudity",
    "topless",
    "underwear",
    "lingerie",
    "swastika",
    "hate symbol",
    "skin colour",
    "skin color",
    "skin tone",
    "ethnicity",
    "racial",
    "syringe",
    "cocaine",
    "drug",
)
PERSON_WORDS = frozenset(
    """person man woman boy girl child kid baby toddler people player astronaut worker
    rider cyclist runner skier surfer swimmer athlete lady gentleman officer soldier student
    teacher chef doctor nurse face portrait""".split()
)
CHILD_WORDS = frozenset("child kid baby toddler boy girl infant schoolchild".split())
# Targets that stand for the whole frame or its backdrop (valid for scene-centric edits).
SCENE_WORDS = frozenset(
    "scene image photo frame sky background lighting light whole entire everything".split()
)
# Requests no single edited photograph can satisfy.
IMPOSSIBLE_PATTERNS: tuple[str, ...] = (
    r"\binvisible\b",
    r"\boutside the (frame|image|picture)\b",
    r"\bbehind the (camera|viewer)\b",
    r"\b(reveal|show) what is (behind|inside|outside)\b",
    r"\bchange the (camera|viewpoint|lens)\b",
    r"\brotate the (camera|viewpoint)\b",
    r"\b(smell|sound|taste|temperature)\b",
    r"\b(metadata|file format|resolution|exif)\b",
    r"\bnext (day|week|year)\b",
    r"\bread (his|her|their) mind\b",
    r"\bmake (it|the image) (real|fake)\b",
)
_IMPOSSIBLE = re.compile("|".join(IMPOSSIBLE_PATTERNS), re.IGNORECASE)


class InstructionConfig(BaseModel):
    """Quotas and limits for instruction sets (goes into the stage fingerprint)."""

    n_min: int = Field(2, ge=1)
    n_max: int = Field(4, ge=1)
    # Relative weights of edit families; 0 disables a family.
    family_weights: dict[str, float] = Field(
        default_factory=lambda: {"object": 0.4, "geometry": 0.2, "scene": 0.2, "person": 0.2}
    )
    # Optional per-kind multipliers within a family (missing = 1).
    kind_weights: dict[str, float] = Field(default_factory=dict)
    # Draw each set's families without replacement while unused ones remain.
    distinct_families: bool = True
    blocked_terms: list[str] = Field(default_factory=lambda: list(DEFAULT_BLOCKED))
    min_region_area: float = 0.002
    max_local_area: float = 0.5
    max_copy_area: float = 0.15
    max_removal_area: float = 0.25

    @field_validator("family_weights")
    @classmethod
    def _known_families(cls, v: dict[str, float]) -> dict[str, float]:
        bad = sorted(set(v) - set(FAMILIES))
        if bad:
            raise ValueError(f"unknown families {bad}")
        if any(w < 0 for w in v.values()) or sum(v.values()) <= 0:
            raise ValueError("family weights must be >= 0 with a positive sum")
        return v


# ---------------------------------------------------------------- difficulty rule

KIND_BASE_DIFFICULTY: dict[str, int] = {
    "lighting": 1,
    "weather": 1,
    "background": 1,
    "time_of_day": 1,
    "recolor": 2,
    "splice": 2,
    "insertion": 2,
    "replacement": 2,
    "clothing": 2,
    "copy_move": 3,
    "removal": 3,
    "resize": 3,
    "reposition": 3,
    "pose": 3,
    "hairstyle": 3,
    "accessory": 3,
    "attribute": 3,
    "local_warp": 4,
    "liquify": 4,
    "emotion": 4,
}


def rate_difficulty(
    kind: str,
    area: float | None = None,
    family: str | None = None,
    params: Mapping[str, Any] | None = None,
) -> int:
    """Rule-based 1-5 rating of how hard the finished edit is to notice (see docs/text-stages.md).

    base(kind) + size term (area >= 0.25: -1, area < 0.02: +1) + scope/magnitude term
    (global scene edit: forced to 1; local lighting: +1; weak warp/liquify strength < 0.25: +1;
    person-centric edit: -1, people's faces and bodies draw the eye); clipped to 1..5.
    """
    params = params or {}
    if family == "scene" and params.get("scope", "global") == "global":
        return 1
    score = KIND_BASE_DIFFICULTY.get(kind, 3)
    if area is not None:
        if area >= 0.25:
            score -= 1
        elif area < 0.02:
            score += 1
    if kind == "lighting" and params.get("scope") == "local":
        score += 1
    strength = params.get("strength")
    if kind in ("liquify", "local_warp") and strength is not None and abs(strength) < 0.25:
        score += 1
    if family == "person":
        score -= 1
    return int(min(5, max(1, score)))


# ---------------------------------------------------------------- validation


def _head(target: str) -> str | None:
    words = content_lemmas(target)
    return words[-1] if words else None


def _is_scene_target(target: str) -> bool:
    words = [w for w in lemmas(target) if w not in {"the", "a", "an", "of", "whole", "entire"}]
    return bool(words) and all(w in SCENE_WORDS for w in words)


def grounding_failure(target: str, caption: str, region_names: Sequence[str] = ()) -> str | None:
    """Why target is not grounded in caption (or the named regions); None when grounded.

    Rule: a target equal (after normalisation) to a region name is grounded; otherwise the
    target's head noun (last content word, modifiers such as colours and positions
    dropped) and at least half of its content words must occur, plural-insensitively, in the
    caption or in one of the caller's region names.
    """
    key = lemmas(target)
    if any(key == lemmas(name) for name in region_names):
        return None  # the caller's own region (e.g. "the dark region at upper left")
    words = content_lemmas(target)
    if not words:
        return f"target {target!r} names no concrete entity"
    vocab = set(lemmas(caption))
    for name in region_names:
        vocab.update(lemmas(name))
    if words[-1] not in vocab:
        return f"target {target!r}: {words[-1]!r} does not occur in the caption"
    hits = sum(w in vocab for w in words)
    if hits * 2 < len(words):
        return f"target {target!r}: only {hits}/{len(words)} content words occur in the caption"
    return None


def blocked_hits(text: str, blocked: Iterable[str]) -> list[str]:
    return [t for t in blocked if contains_term(text, t)]


def _bbox_failure(bbox: object) -> str | None:
    if bbox is None:
        return None
    if not isinstance(bbox, Sequence) or len(bbox) != 4:
        return "bbox must be [x0, y0, x1, y1]"
    x0, y0, x1, y1 = (float(v) for v in bbox)
    if not (0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1):
        return f"bbox {list(bbox)} is not a normalised box inside the image"
    return None


def validate_instruction(
    item: Mapping[str, Any] | EditInstruction,
    caption: str,
    config: InstructionConfig | None = None,
    region_names: Sequence[str] = (),
) -> list[str]:
    """Failures of one instruction (schema, family/kind, grounding, safety, possibility)."""
    cfg = config or InstructionConfig()
    raw = item.model_dump() if isinstance(item, EditInstruction) else dict(item)
    try:
        ins = EditInstruction.model_validate(raw)
    except ValidationError as e:
        return [f"schema: {err['loc']}: {err['msg']}" for err in e.errors()]
    out: list[str] = []
    if ins.kind not in FAMILY_KINDS[ins.family]:
        out.append(f"kind {ins.kind!r} is not a {ins.family}-centric kind")
    if len(ins.text.split()) < 3:
        out.append("text is too short to be a concrete instruction")
    if not ins.location_hint.strip():
        out.append("location_hint is empty")
    if len(ins.expected_change.split()) < 2:
        out.append("expected_change is empty or too vague")
    scene_target = _is_scene_target(ins.target)
    if ins.kind in INSERTION_KINDS:
        if not content_lemmas(ins.target):
            out.append(f"insertion target {ins.target!r} names no concrete object")
    elif scene_target:
        if ins.family != "scene":
            out.append(f"{ins.kind} cannot apply to the whole scene ({ins.target!r})")
    else:
        why = grounding_failure(ins.target, caption, region_names)
        if why:
            out.append(why)
        head = _head(ins.target)
        if head and head not in set(lemmas(ins.text)):
            out.append(f"text does not mention the target {ins.target!r}")
    fields = " | ".join([ins.text, ins.target, ins.location_hint, ins.expected_change])
    hits = blocked_hits(fields, cfg.blocked_terms)
    if hits:
        out.append(f"blocked content: {hits}")
    if _IMPOSSIBLE.search(ins.text) or _IMPOSSIBLE.search(ins.expected_change):
        out.append("edit cannot be realised in a single photograph")
    tgt = set(content_lemmas(ins.target, drop_modifiers=False))
    if ins.kind in PERSON_BODY_KINDS and tgt & CHILD_WORDS:
        out.append("edits to a child's body or appearance are not allowed")
    bb = _bbox_failure(raw.get("bbox"))
    if bb:
        out.append(bb)
    return out


def validate_instructions(
    items: Sequence[Mapping[str, Any] | EditInstruction],
    caption: str,
    config: InstructionConfig | None = None,
    regions: Sequence[Mapping[str, Any]] = (),
) -> list[str]:
    """All failures of an instruction set; empty list = valid. Prefix 'i: ' names the item."""
    cfg = config or InstructionConfig()
    names = [str(r.get("name", "")) for r in regions]
    out: list[str] = []
    if not (cfg.n_min <= len(items) <= cfg.n_max):
        out.append(f"set has {len(items)} instructions, expected {cfg.n_min}-{cfg.n_max}")
    seen_pairs: set[tuple[str, tuple[str, ...]]] = set()
    seen_text: set[str] = set()
    for i, item in enumerate(items):
        out.extend(f"{i}: {f}" for f in validate_instruction(item, caption, cfg, names))
        d = item.model_dump() if isinstance(item, EditInstruction) else dict(item)
        target_key = [w for w in lemmas(str(d.get("target", ""))) if w not in ("the", "a", "an")]
        key = (str(d.get("kind")), tuple(target_key))
        if key in seen_pairs:
            out.append(f"{i}: repeats kind {key[0]!r} on the same target")
        seen_pairs.add(key)
        norm = " ".join(lemmas(str(d.get("text", ""))))
        if norm in seen_text:
            out.append(f"{i}: duplicate instruction text")
        seen_text.add(norm)
    return out


# ---------------------------------------------------------------- offline generator

PALETTE: tuple[tuple[str, tuple[int, int, int]], ...] = (
    ("bright red", (220, 30, 40)),
    ("deep blue", (30, 60, 200)),
    ("emerald green", (20, 160, 80)),
    ("sunflower yellow", (240, 200, 30)),
    ("orange", (245, 130, 20)),
    ("purple", (130, 50, 170)),
    ("turquoise", (40, 200, 200)),
    ("pink", (240, 120, 180)),
    ("white", (245, 245, 245)),
    ("black", (20, 20, 20)),
    ("brown", (120, 75, 40)),
)
SPLICE_OBJECTS: tuple[str, ...] = (
    "red rubber ball",
    "ceramic coffee mug",
    "small potted plant",
    "pigeon",
    "glass bottle",
    "folded newspaper",
    "yellow umbrella",
    "orange traffic cone",
    "tennis ball",
    "paper lantern",
)


_POSITION_WORDS = frozenset("left right upper lower top bottom centre center middle".split())


def _location_phrase(bbox: Sequence[float]) -> str:
    cx, cy = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
    v = "upper" if cy < 1 / 3 else ("lower" if cy > 2 / 3 else "middle")
    h = "left" if cx < 1 / 3 else ("right" if cx > 2 / 3 else "centre")
    if v == "middle" and h == "centre":
        return "in the centre of the frame"
    if v == "middle":
        return f"on the {h} side of the frame"
    if h == "centre":
        return f"in the {v} centre of the frame"
    return f"in the {v} {h} of the frame"


def _area(r: Mapping[str, Any]) -> float:
    if r.get("area") is not None:
        return float(r["area"])
    x0, y0, x1, y1 = r["bbox"]
    return max(0.0, (x1 - x0) * (y1 - y0))


def _is_person(name: str) -> bool:
    return bool(set(content_lemmas(name, drop_modifiers=False)) & PERSON_WORDS)


def _is_child(name: str) -> bool:
    return bool(set(content_lemmas(name, drop_modifiers=False)) & CHILD_WORDS)


def _copy_destinations(bbox: Sequence[float]) -> list[tuple[str, list[float]]]:
    """Non-overlapping same-size boxes beside the source, inside the frame."""
    x0, y0, x1, y1 = bbox
    w, h = x1 - x0, y1 - y0
    gap_x, gap_y = max(0.02, 0.15 * w), max(0.02, 0.15 * h)
    cands = {
        "to the right of": [x1 + gap_x, y0, x1 + gap_x + w, y1],
        "to the left of": [x0 - gap_x - w, y0, x0 - gap_x, y1],
        "below": [x0, y1 + gap_y, x1, y1 + gap_y + h],
        "above": [x0, y0 - gap_y - h, x1, y0 - gap_y],
    }
    return [
        (k, [round(v, 4) for v in b])
        for k, b in cands.items()
        if b[0] >= 0 and b[1] >= 0 and b[2] <= 1 and b[3] <= 1
    ]


def _feasible(kind: str, r: Mapping[str, Any] | None, cfg: InstructionConfig) -> bool:
    if kind == "lighting":
        return r is None or cfg.min_region_area <= _area(r) <= cfg.max_local_area
    if r is None:
        return False
    a = _area(r)
    if a < cfg.min_region_area:
        return False
    if kind == "copy_move":
        return a <= cfg.max_copy_area and bool(_copy_destinations(r["bbox"]))
    if kind == "removal":
        return a <= cfg.max_removal_area
    if kind == "splice":
        return a >= 0.02  # room for the inserted object inside the region
    if kind in ("recolor", "local_warp"):
        return a <= cfg.max_local_area and (kind == "recolor" or a >= 0.01)
    if kind == "liquify":
        return a >= 0.005 and a <= cfg.max_local_area
    return False


def _pick(rng: np.random.Generator, items: Sequence[Any], weights: Sequence[float]) -> Any:
    w = np.asarray(weights, dtype=float)
    return items[int(rng.choice(len(items), p=w / w.sum()))]


def _colour_far_from(rng: np.random.Generator, mean_rgb: Sequence[float] | None) -> tuple:
    if mean_rgb is None:
        return PALETTE[int(rng.integers(len(PALETTE)))]
    m = np.asarray(mean_rgb, dtype=float)
    if m.max() <= 1.0:
        m = m * 255.0
    far = [p for p in PALETTE if np.linalg.norm(np.asarray(p[1], float) - m) >= 140]
    pool = far or sorted(PALETTE, key=lambda p: -np.linalg.norm(np.asarray(p[1], float) - m))[:3]
    return pool[int(rng.integers(len(pool)))]


def _make(
    kind: str,
    family: str,
    r: Mapping[str, Any] | None,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """Concrete text, params and boxes for one (kind, region) pair."""
    if r is None:  # global lighting
        gain = float(rng.choice([rng.uniform(0.55, 0.75), rng.uniform(1.3, 1.6)]))
        word = "Darken" if gain < 1 else "Brighten"
        how = "faded" if gain < 1 else "intensified"
        return dict(
            text=f"{word} the whole scene as if the light had {how}; keep all objects.",
            target="the whole scene",
            location_hint="the entire frame",
            bbox=[0.0, 0.0, 1.0, 1.0],
            change_bbox=[0.0, 0.0, 1.0, 1.0],
            expected_change=f"the entire image becomes {'darker' if gain < 1 else 'brighter'}"
            f" (gain {gain:.2f}) with unchanged content",
            params={"scope": "global", "gain": round(gain, 3)},
            area=1.0,
        )
    name = str(r["name"])
    bbox = [round(float(v), 4) for v in r["bbox"]]
    loc = _location_phrase(bbox)
    # Names such as "the dark region at upper left" already say where they are.
    at = "" if set(lemmas(name)) & _POSITION_WORDS else f" {loc}"
    area = _area(r)
    out: dict[str, Any] = dict(
        target=name, location_hint=loc, bbox=bbox, change_bbox=bbox, area=area
    )
    if kind == "recolor":
        cname, rgb = _colour_far_from(rng, r.get("mean_rgb"))
        if family == "person":
            out["text"] = f"Change the colour of the clothing worn by {name} to {cname}."
            out["expected_change"] = f"the clothing of {name} turns {cname}"
        else:
            out["text"] = f"Recolour {name}{at} to {cname}, keeping its texture and shading."
            out["expected_change"] = f"{name} appears {cname} instead of its original colour"
        out["params"] = {"color_name": cname, "rgb": list(rgb)}
    elif kind == "copy_move":
        dests = _copy_destinations(bbox)
        where, dest = dests[int(rng.integers(len(dests)))]
        out["text"] = f"Duplicate {name} and place the copy just {where} the original."
        out["expected_change"] = f"a second, identical copy of {name} appears {where} the first"
        out["change_bbox"] = dest
        out["params"] = {"src_bbox": bbox, "dst_bbox": dest, "direction": where}
    elif kind == "removal":
        out["text"] = f"Remove {name}{at} and fill the area with the surrounding background."
        out["expected_change"] = f"{name} is gone and its area shows continuous background"
        out["params"] = {"method": "inpaint", "mask_bbox": bbox}
    elif kind == "splice":
        obj = SPLICE_OBJECTS[int(rng.integers(len(SPLICE_OBJECTS)))]
        x0, y0, x1, y1 = bbox
        frac = float(rng.uniform(0.2, 0.35))
        w, h = (x1 - x0) * frac, (y1 - y0) * frac
        cx = float(rng.uniform(x0 + w / 2, x1 - w / 2))
        cy = float(rng.uniform(y0 + h / 2, y1 - h / 2))
        dest = [
            round(cx - w / 2, 4),
            round(cy - h / 2, 4),
            round(cx + w / 2, 4),
            round(cy + h / 2, 4),
        ]
        out["text"] = f"Insert a {obj} cut from another photograph onto {name}."
        out["target"] = obj
        out["location_hint"] = f"on {name}, {loc}"
        out["expected_change"] = f"a {obj} that was not there before appears on {name}"
        out["change_bbox"] = dest
        out["params"] = {"object": obj, "dst_bbox": dest, "donor_seed": int(rng.integers(2**31))}
    elif kind == "local_warp":
        direction = str(rng.choice(["left", "right", "up", "down"]))
        strength = round(float(rng.uniform(0.1, 0.3)), 3)
        out["text"] = (
            f"Tilt {name} slightly, as if its plane leaned {direction}, "
            f"without moving anything around it."
        )
        out["expected_change"] = f"{name} shows a skewed perspective leaning {direction}"
        out["params"] = {"mode": "perspective", "direction": direction, "strength": strength}
    elif kind == "liquify":
        strength = round(float(rng.choice([-1, 1]) * rng.uniform(0.15, 0.5)), 3)
        x0, y0, x1, y1 = bbox
        center = [round((x0 + x1) / 2, 4), round((y0 + y1) / 2, 4)]
        radius = round(0.5 * min(x1 - x0, y1 - y0), 4)
        verb = "Bulge" if strength > 0 else "Pinch"
        shape = "rounder and swollen" if strength > 0 else "narrower and pinched"
        if family == "person":
            out["text"] = f"{verb} the silhouette of {name} at its middle, reshaping the outline."
        else:
            out["text"] = f"{verb} the middle of {name} so its outline bends."
        out["expected_change"] = f"the centre of {name} looks {shape}"
        out["params"] = {"center": center, "radius": radius, "strength": strength}
    elif kind == "lighting":
        gain = float(rng.choice([rng.uniform(0.5, 0.7), rng.uniform(1.35, 1.7)]))
        word = "Darken" if gain < 1 else "Brighten"
        cause = "shadow fell on" if gain < 1 else "spotlight lit"
        out["text"] = f"{word} {name}{at} as if a {cause} it."
        tone = "darker" if gain < 1 else "brighter"
        out["expected_change"] = f"{name} becomes {tone} than its surroundings"
        out["params"] = {"scope": "local", "gain": round(gain, 3)}
    else:  # pragma: no cover - guarded by OFFLINE_KINDS
        raise ValueError(f"offline generator cannot write kind {kind!r}")
    return out


def offline_instructions(
    caption: str,
    regions: Sequence[Mapping[str, Any]],
    rng: np.random.Generator,
    config: InstructionConfig | None = None,
) -> list[dict[str, Any]]:
    """2-4 executable edits for one image from caller-computed regions; deterministic given rng.

    Families are drawn by ``config.family_weights`` (without replacement while possible), then a
    kind the offline backend can execute, then a region that suits it (size, room for a copy),
    preferring regions not yet used. Returns [] when no region allows any edit.
    """
    cfg = config or InstructionConfig()
    regs = [r for r in regions if _bbox_failure(r.get("bbox")) is None and r.get("name")]
    options: list[tuple[str, str, int | None]] = []  # (family, kind, region index)
    for kind, kind_fams in OFFLINE_KINDS.items():
        for fam in kind_fams:
            if cfg.family_weights.get(fam, 0) <= 0 or cfg.kind_weights.get(kind, 1.0) <= 0:
                continue
            if kind == "lighting":
                options.append((fam, kind, None))
            for i, r in enumerate(regs):
                person, child = _is_person(str(r["name"])), _is_child(str(r["name"]))
                if fam == "person" and (not person or child):
                    continue
                if fam != "person" and person and kind in ("recolor", "liquify", "splice"):
                    continue  # people's recolor/liquify are person-centric; no splicing onto people
                if _feasible(kind, r if kind != "lighting" else r, cfg):
                    options.append((fam, kind, i))
    if not options:
        return []
    n = int(rng.integers(cfg.n_min, cfg.n_max + 1))
    used_pairs: set[tuple[str, int | None]] = set()
    used_regions: set[int] = set()
    used_fams: list[str] = []
    out: list[dict[str, Any]] = []
    for idx in range(n):
        avail = [o for o in options if (o[1], o[2]) not in used_pairs]
        if not avail:
            break
        fams = sorted({o[0] for o in avail}, key=FAMILIES.index)
        fresh = [f for f in fams if f not in used_fams]
        if cfg.distinct_families and fresh:
            fams = fresh
        fam = _pick(rng, fams, [cfg.family_weights.get(f, 0) for f in fams])
        kinds = sorted({o[1] for o in avail if o[0] == fam})
        kind = _pick(rng, kinds, [cfg.kind_weights.get(k, 1.0) for k in kinds])
        cands = [o[2] for o in avail if o[0] == fam and o[1] == kind]
        unused = [c for c in cands if c is None or c not in used_regions]
        pool = unused or cands
        # Larger regions are more often chosen (edits on them are easier to execute well).
        weights = [math.sqrt(_area(regs[c])) if c is not None else 0.5 for c in pool]
        choice = _pick(rng, pool, weights)
        made = _make(kind, fam, regs[choice] if choice is not None else None, rng)
        area = made.pop("area")
        made.update(
            idx=idx,
            instruction_id_suffix=f"e{idx}",
            family=fam,
            kind=kind,
            difficulty=rate_difficulty(kind, area, fam, made["params"]),
        )
        out.append(made)
        used_pairs.add((kind, choice))
        if choice is not None:
            used_regions.add(choice)
        used_fams.append(fam)
    return out


# ---------------------------------------------------------------- balance table


def family_balance(
    rows: Iterable[Mapping[str, Any]] | Any,
    config: InstructionConfig | None = None,
) -> list[dict[str, Any]]:
    """Counts per family and per (family, kind) of ok rows, with the configured target share.

    Accepts an iterable of row dicts or anything with ``to_pylist()`` (a pyarrow Table).
    Family rows have kind '*'. Rows whose status is set and not 'ok' are skipped.
    """
    cfg = config or InstructionConfig()
    if hasattr(rows, "to_pylist"):
        rows = rows.to_pylist()
    fam_n: dict[str, int] = {}
    kind_n: dict[tuple[str, str], int] = {}
    total = 0
    for r in rows:
        if r.get("status") not in (None, "ok"):
            continue
        f, k = str(r.get("family")), str(r.get("kind"))
        fam_n[f] = fam_n.get(f, 0) + 1
        kind_n[(f, k)] = kind_n.get((f, k), 0) + 1
        total += 1
    wsum = sum(cfg.family_weights.values())
    order = list(FAMILIES) + sorted(set(fam_n) - set(FAMILIES))
    table: list[dict[str, Any]] = []
    for f in order:
        n = fam_n.get(f, 0)
        target = cfg.family_weights.get(f, 0.0) / wsum if wsum else 0.0
        table.append(
            dict(
                family=f,
                kind="*",
                count=n,
                share=n / total if total else 0.0,
                target_share=round(target, 4),
            )
        )
        for (ff, k), m in sorted(kind_n.items()):
            if ff == f:
                table.append(dict(family=f, kind=k, count=m, share=m / total, target_share=None))
    return table


# ---------------------------------------------------------------- LLM prompt variables


def kinds_table(config: InstructionConfig | None = None) -> str:
    """The families/kinds list shown to the LLM (families with weight 0 are left out)."""
    cfg = config or InstructionConfig()
    lines = []
    for fam in FAMILIES:
        if cfg.family_weights.get(fam, 0) <= 0:
            continue
        kinds = [k for k in FAMILY_KINDS[fam] if cfg.kind_weights.get(k, 1.0) > 0]
        lines.append(f"- {fam}: {', '.join(kinds)}")
    return "\n".join(lines)


def instruction_vars(caption: str, config: InstructionConfig | None = None) -> dict[str, Any]:
    """Variables for render('edit_instructions', ...)."""
    cfg = config or InstructionConfig()
    return dict(
        caption=caption,
        n_min=str(cfg.n_min),
        n_max=str(cfg.n_max),
        kinds_table=kinds_table(cfg),
        blocked_terms=", ".join(cfg.blocked_terms),
    )


def difficulty_vars(caption: str, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Variables for render('instruction_difficulty', ...)."""
    listing = "\n".join(
        f"{i}. [{it['family']}/{it['kind']}] {it['text']}" for i, it in enumerate(items)
    )
    return dict(caption=caption, instructions=listing)
