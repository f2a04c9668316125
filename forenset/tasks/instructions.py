"""instructions: 2–4 targeted edits per image, each naming a located target region.

Offline (``instructions.llm`` unset): ``forenset.text.instructions.offline_instructions`` over
the caption's entity boxes, checked by ``validate_instructions`` and redrawn on failure, then
translated into the offline editor's parameters. With a model pool: the ``edit_instructions``
template (and ``instruction_difficulty`` for ratings); an LLM names targets but no boxes, so
every target is grounded by matching its name against the caption entities' names — a target
that cannot be located fails validation and the set is regenerated with the reasons.

Splicing is batch-level on both paths: the donor is an entity from another photo of the same
shard (``donor_*`` in params, which the offline editor reads).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import cv2
import numpy as np
import pyarrow as pa
from pydantic import Field, model_validator

from forenset.backends.edit_strength import StrengthRules, can_show, change_of, measure
from forenset.backends.image.generator import GeneratorConfig
from forenset.backends.image.offline import HUES
from forenset.backends.llm.types import ChatRequest
from forenset.backends.rule_judge import judge_measured
from forenset.images import decode_rgb
from forenset.schemas.instructions import SCHEMA
from forenset.seeds import rng_for
from forenset.tasks.base import ShardSpec, dumps
from forenset.tasks.modelcall import (
    ModelStageConfig,
    Outcome,
    Validator,
    model_stage_config,
    request,
    set_usage,
)
from forenset.tasks.strategy import ModelStrategy, OfflineStrategy, StrategyStage
from forenset.text.instructions import (
    INSERTION_KINDS,
    InstructionConfig,
    difficulty_vars,
    instruction_vars,
    offline_instructions,
    rate_difficulty,
    validate_instruction,
    validate_instructions,
)
from forenset.text.lexicon import content_lemmas, lemmas
from forenset.text.models import ALL_KINDS, DifficultyRatings, EditInstructionSet


class InstructionsConfig(ModelStageConfig):
    """Edit sets per image: 2-4 edits (XPlainVerse Step 1). ``kinds`` are kind weights: a kind
    missing or 0 is never asked for. Unset (the default), the kinds are what the generator
    pool executes (each backend's ``edit_kinds``): the offline editor's seven, every kind the
    paper names once a diffusers or API editor is in the pool."""

    min_edits: int = Field(2, ge=1, le=8)
    max_edits: int = Field(4, ge=1, le=8)
    kinds: dict[str, float] | None = None
    family_weights: dict[str, float] = {"object": 0.4, "geometry": 0.2, "scene": 0.2, "person": 0.2}
    rate_difficulty_with_llm: bool = True  # LLM path: instruction_difficulty template

    @model_validator(mode="after")
    def _range(self) -> InstructionsConfig:
        if self.min_edits > self.max_edits:
            raise ValueError("min_edits must not exceed max_edits")
        return self


TEMPLATES = ("edit_instructions", "instruction_difficulty")
LOCAL_MAX_AREA = 0.3
DONOR_MIN_AREA = 0.005
# Colour words the offline editor can paint (its hue table), and palette names mapped onto them.
EDITOR_COLOURS = ("red", "orange", "yellow", "green", "cyan", "blue", "purple", "magenta")
COLOUR_ALIASES = {"turquoise": "cyan", "pink": "magenta", "violet": "purple", "teal": "cyan"}
DARKER = re.compile(r"\b(darken|dim|dimmer|darker|shadow|shade|dusk|night)\w*", re.IGNORECASE)
SHRINK = re.compile(r"\b(pinch|shrink|narrow|thin|slim|squeeze|compress)\w*", re.IGNORECASE)
FULL = [0.0, 0.0, 1.0, 1.0]


def area(b: Sequence[float]) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def valid_box(b: Any) -> bool:
    try:
        x0, y0, x1, y1 = (float(v) for v in b)
    except (TypeError, ValueError):
        return False
    return 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1


def regions_of(entities_json: str | None) -> list[dict[str, Any]]:
    """Caption entities usable as edit regions: named, with a normalised box."""
    out = []
    for e in json.loads(entities_json or "[]"):
        if isinstance(e, dict) and e.get("name") and valid_box(e.get("bbox")):
            b = [float(v) for v in e["bbox"]]
            out.append({**e, "bbox": b, "area": float(e.get("area") or area(b))})
    return out


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


def locate(name: str, regions: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The region a phrase names: an exact name, else the region sharing the head noun and
    most content words (plural-insensitive); None when no region's noun occurs."""
    norm = " ".join(lemmas(name))
    for r in regions:
        if " ".join(lemmas(str(r["name"]))) == norm:
            return r
    words = set(content_lemmas(name))
    best, best_score = None, 0
    for r in regions:
        rw = content_lemmas(str(r["name"]))
        if not rw or rw[-1] not in words:
            continue
        score = len(words & set(rw))
        if score > best_score:
            best, best_score = r, score
    return best


def inner_box(anchor: Sequence[float], rng: np.random.Generator) -> list[float]:
    """A box of 20-35 % of the anchor's size, inside it (where a splice lands)."""
    x0, y0, x1, y1 = anchor
    frac = float(rng.uniform(0.2, 0.35))
    w, h = (x1 - x0) * frac, (y1 - y0) * frac
    cx = float(rng.uniform(x0 + w / 2, x1 - w / 2))
    cy = float(rng.uniform(y0 + h / 2, y1 - h / 2))
    return [round(v, 4) for v in (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)]


def with_article(name: str) -> str:
    """'cup' -> 'the cup', so generated sentences read naturally ('Darken the cup ...')."""
    first = name.split(" ", 1)[0].lower()
    return name if first in ("the", "a", "an", "this", "that") else f"the {name}"


def editor_colour(text: str) -> str | None:
    words = lemmas(text)
    for w in words:
        if w in EDITOR_COLOURS:
            return w
        if w in COLOUR_ALIASES:
            return COLOUR_ALIASES[w]
    return None


def donor_pool(rows: list[dict[str, Any]], i: int) -> list[dict[str, Any]]:
    """Entities of the shard's other photos that can be cut out and pasted (not too big)."""
    out = []
    for j, o in enumerate(rows):
        if j == i:
            continue
        try:
            regions = regions_of(o.get("entities"))
        except (TypeError, ValueError):  # that photo's own row reports it; it gives no donor
            continue
        for e in regions:
            if DONOR_MIN_AREA < area(e["bbox"]) <= LOCAL_MAX_AREA:
                out.append({"image_id": o["image_id"], "blob": o["blob"], **e})
    return out


def donor_params(donor: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "donor_image_id": donor["image_id"],
        "donor_blob": donor["blob"],
        "donor_bbox": [round(float(v), 4) for v in donor["bbox"]],
        "donor_entity": donor["name"],
    }


def ideal_recolour(img: np.ndarray, box: Sequence[float], colour: str) -> np.ndarray:
    """``img`` with the box given the colour's a*b* (HSV hue of the offline editor's palette at
    saturation and value 200) at each pixel's own lightness: a complete recolour."""
    h, w = img.shape[:2]
    x0, y0 = int(box[0] * w), int(box[1] * h)
    x1, y1 = max(x0 + 1, int(np.ceil(box[2] * w))), max(y0 + 1, int(np.ceil(box[3] * h)))
    ref = np.array([[[HUES[colour], 200, 200]]], dtype=np.uint8)
    ref_lab = cv2.cvtColor(
        cv2.cvtColor(ref, cv2.COLOR_HSV2RGB).astype(np.float32) / 255, cv2.COLOR_RGB2Lab
    )
    lab = cv2.cvtColor(img[y0:y1, x0:x1].astype(np.float32) / 255, cv2.COLOR_RGB2Lab)
    lab[..., 1], lab[..., 2] = ref_lab[0, 0, 1], ref_lab[0, 0, 2]
    lab[..., 0] = np.clip(lab[..., 0], 35, 85)
    out = img.copy()
    out[y0:y1, x0:x1] = (
        np.clip(cv2.cvtColor(lab, cv2.COLOR_Lab2RGB) * 255, 0, 255).round().astype(np.uint8)
    )
    return out


def recolour_shows(img: np.ndarray, it: dict[str, Any]) -> str | None:
    """None when a complete recolour of the target to the asked colour (``ideal_recolour``)
    passes the rule judge (KEEP), else why not: a colour the target nearly has already
    (red -> orange) turns its hue too little to show as a recolour."""
    colour = str((it.get("params") or {}).get("colour"))
    rules = StrengthRules()
    ideal = ideal_recolour(img, it["change_bbox"], colour)
    v = judge_measured(it, measure(img, ideal, it, rules), rules, offtarget_dominance=1.0)
    # only the change's own shortfall counts (the ideal's hard box edge is no artefact of
    # the edit the generator will make)
    if v["verdict"] == "KEEP" or v["failure_category"] not in ("edit_partial", "edit_missing"):
        return None
    return f"the target is already close to {colour}: {v['rationale']}"


def executable(
    item: dict[str, Any], rng: np.random.Generator, donors: list[dict[str, Any]]
) -> dict[str, Any]:
    """An offline-generator edit with the parameters the offline editor reads added
    (colour, mode, additive gain, splice donor); the text is rewritten where the editor
    would otherwise do something else than it says."""
    it = dict(item)
    p = dict(it.get("params") or {})
    kind = it["kind"]
    if kind == "recolor":
        name = str(p.get("color_name", ""))
        col = editor_colour(name)
        if col is None:  # white/black/brown: no hue to paint; pick one the editor has
            col = str(rng.choice(EDITOR_COLOURS))
            for k in ("text", "expected_change"):
                it[k] = it[k].replace(name, col) if name else it[k]
            p["color_name"] = col
            p.pop("rgb", None)
        p["colour"] = col
    elif kind == "liquify":
        p["mode"] = "bulge" if float(p.get("strength", 1.0)) > 0 else "pinch"
    elif kind == "lighting":
        p["gain"] = round(float(p.get("gain", 1.5)) - 1.0, 3)  # multiplier -> editor's offset
        p["multiplier"] = item["params"].get("gain")
    elif kind == "splice":
        donor = donors[int(rng.integers(len(donors)))]
        anchor = str(it["location_hint"]).removeprefix("on ").split(",")[0]
        obj = str(donor["name"])
        it["text"] = f"Insert the {obj} cut from another photograph onto {anchor}."
        it["target"] = obj
        it["expected_change"] = f"a {obj} that was not there before appears on {anchor}"
        p = {**p, "object": obj, **donor_params(donor)}
    it["params"] = p
    return it


class InstructionsOffline(OfflineStrategy["Instructions", InstructionsConfig]):
    """``offline_instructions`` over the caption's entity boxes, per photo, donors from the
    shard's other photos."""

    stage: Instructions
    timed = False  # rows keep their shape: edits carry elapsed_ms 0.0 (as model rows do)

    def run(self, batch: pa.Table, shard: ShardSpec | None) -> list[dict[str, Any]]:
        rows = batch.to_pylist()
        out: list[dict[str, Any]] = []
        for i, row in enumerate(rows):
            out.extend(self.isolated(row, partial(self.instructions, row, rows, i)))
        return out

    def showable(self, row: dict[str, Any], it: dict[str, Any]) -> list[str]:
        """[] when the target can show the change the kind needs (Edit-Check's capability
        measure, ``edit_strength.can_show``), else why not: a darken of a near-black target or
        a brighten of a near-white one is not asked (the judge could only call it "no visible
        change possible"), nor a recolour to a colour the target nearly has (``recolour_shows``).
        Only kinds whose capability depends on the pixels are checked."""
        recolour = it["kind"] == "recolor" and (it.get("params") or {}).get("colour") in HUES
        if not (recolour or change_of(it) in ("luminance", "blur")) or not row.get("blob"):
            return []
        key = str(row["blob"])
        if self._pixels is None or self._pixels[0] != key:  # one photo decoded at a time
            self._pixels = (key, decode_rgb(self.ctx.store.get_blob(key)))
        img = self._pixels[1]
        if recolour:
            why = recolour_shows(img, it)
            return [why] if why else []
        ok, share = can_show(img, it)
        if ok:
            return []
        return [f"only {share:.2f} of the target can show this change (too dark, light or flat)"]

    _pixels: tuple[str, Any] | None = None

    def instructions(
        self, row: dict[str, Any], rows: list[dict[str, Any]], i: int
    ) -> list[dict[str, Any]]:
        """Draw a set, keep the edits that pass ``validate_instruction``, top up from new draws
        (up to ``max_attempts``), then check the whole set with ``validate_instructions``."""
        c, stage = self.cfg, self.stage
        donors = donor_pool(rows, i)
        rng = rng_for(self.ctx.seed, stage.name, row["image_id"])
        caption = row["caption"] or ""
        regions = [
            {**r, "name": with_article(str(r["name"]))} for r in regions_of(row.get("entities"))
        ]
        names = [str(r["name"]) for r in regions]
        tcfg = stage.text_config(splice=bool(donors))
        kept: list[dict[str, Any]] = []
        problems: list[str] = []
        want = used = 0
        for attempt in range(1, c.max_attempts + 1):
            used = attempt
            made = offline_instructions(caption, regions, rng, tcfg)
            if not made:
                return [stage.set_error(row, "no target region found in the caption entities")]
            want = want or len(made)
            for m in made:
                it = executable(m, rng, donors)
                seen = {(k["kind"], k["target"]) for k in kept} | {k["text"] for k in kept}
                if len(kept) >= want or (it["kind"], it["target"]) in seen or it["text"] in seen:
                    continue
                why = validate_instruction(it, caption, tcfg, names) or self.showable(row, it)
                if why:
                    problems.extend(f"{it['kind']} on {it['target']!r}: {w}" for w in why)
                else:
                    kept.append(it)
            if len(kept) >= want:
                break
        final = validate_instructions(kept, caption, tcfg, regions) if kept else ["no valid edit"]
        if final:
            return [
                stage.set_error(
                    row,
                    f"instruction set failed validation after {c.max_attempts} attempts: "
                    + "; ".join(final + problems[:3]),
                    attempts=c.max_attempts,
                )
            ]
        seed = int(rng.integers(2**62))
        return [
            stage.edit_row(
                row,
                k,
                {**it, "idx": k},
                seed,
                status="ok",
                backend="offline",
                model="text-offline-v1",
                attempts=used,
            )
            for k, it in enumerate(kept)
        ]


Ask = tuple[ChatRequest, Validator, list[dict[str, Any]], list[dict[str, Any]]]


class InstructionsModel(ModelStrategy["Instructions", InstructionsConfig]):
    """Round 1: ``edit_instructions`` per photo, its targets grounded on the caption entities
    (regenerated while one cannot be located); round 2: ``instruction_difficulty`` ratings."""

    stage: Instructions

    def ground(
        self,
        items: list[dict[str, Any]],
        regions: list[dict[str, Any]],
        donors: list[dict[str, Any]],
        rng: np.random.Generator,
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """Boxes and editor params for LLM edits, from the caption entities; failures name
        the targets that cannot be located (the set is then regenerated)."""
        out, problems = [], []
        names = ", ".join(str(r["name"]) for r in regions) or "none"
        for i, it in enumerate(items):
            it = dict(it)
            kind, text = it["kind"], f"{it['text']} {it['expected_change']}"
            params: dict[str, Any] = {}
            words = set(lemmas(it["target"]))
            whole = it["family"] == "scene" and (
                words & {"scene", "image", "photo", "frame", "sky", "background"}
                or locate(it["target"], regions) is None
            )
            if kind in INSERTION_KINDS:
                anchor = locate(it["location_hint"], regions) or locate(it["text"], regions)
                if anchor is None:
                    problems.append(
                        f"{i}: cannot locate where to put the {it['target']!r}; name one of: "
                        f"{names} in location_hint"
                    )
                    continue
                it["bbox"] = list(anchor["bbox"])
                it["change_bbox"] = inner_box(anchor["bbox"], rng)
                if kind == "splice":
                    donor = locate(it["target"], donors)
                    if donor is None:
                        avail = ", ".join(sorted({str(d["name"]) for d in donors})) or "none"
                        problems.append(
                            f"{i}: a splice must insert an object from another photo of this "
                            f"batch; available: {avail}"
                        )
                        continue
                    params.update(object=it["target"], **donor_params(donor))
            elif whole:
                it["bbox"], it["change_bbox"] = list(FULL), list(FULL)
                params["scope"] = "global"
            else:
                r = locate(it["target"], regions)
                if r is None:
                    problems.append(
                        f"{i}: target {it['target']!r} cannot be located; use one of: {names}"
                    )
                    continue
                it["bbox"] = list(r["bbox"])
                it["change_bbox"] = free_box(r["bbox"], rng) if kind == "copy_move" else r["bbox"]
            if kind == "recolor":
                col = editor_colour(text)
                if col:
                    params["colour"] = col
            elif kind == "liquify":
                params["mode"] = "pinch" if SHRINK.search(text) else "bulge"
            elif kind == "lighting":
                params["gain"] = -0.45 if DARKER.search(text) else 0.5
            it["params"] = params
            if it.get("difficulty") is None:
                it["difficulty"] = rate_difficulty(
                    kind, area(it["change_bbox"]), it["family"], params
                )
            out.append(it)
        return out, problems

    def ground_rng(self, image_id: str) -> np.random.Generator:
        return rng_for(self.ctx.seed, self.stage.name, image_id, "ground")

    def ask(self, rows: list[dict[str, Any]], i: int, tcfg: InstructionConfig) -> Ask:
        """Photo ``i``'s request, its validator, its regions and its splice donors."""
        row = rows[i]
        regions, donors = regions_of(row.get("entities")), donor_pool(rows, i)
        caption = row["caption"] or ""
        req = request(
            "instructions",
            row["image_id"],
            "edit_instructions",
            self.cfg.prompts_dir,
            response_model=EditInstructionSet,
            **instruction_vars(caption, tcfg),
        )

        def check(reply: EditInstructionSet) -> list[str]:
            got = [x.model_dump() for x in reply.instructions]
            problems = validate_instructions(got, caption, tcfg, regions)
            problems += [  # a kind no generator of the pool executes would make no candidate
                f"{i}: kind {x['kind']!r} is not in the table of allowed kinds"
                for i, x in enumerate(got)
                if tcfg.kind_weights.get(x["kind"], 0.0) <= 0
            ]
            return problems + self.ground(got, regions, donors, self.ground_rng(row["image_id"]))[1]

        return req, check, regions, donors

    def grounded(
        self,
        row: dict[str, Any],
        regions: list[dict[str, Any]],
        donors: list[dict[str, Any]],
        o: Outcome,
    ) -> list[dict[str, Any]]:
        got = [x.model_dump() for x in o.parsed().instructions]
        return self.ground(got, regions, donors, self.ground_rng(row["image_id"]))[0]

    def rating(
        self, row: dict[str, Any], its: list[dict[str, Any]]
    ) -> tuple[ChatRequest, Validator]:
        """A photo's instruction_difficulty request; a failed rating keeps the set's own."""
        req = request(
            "instruction_difficulty",
            row["image_id"],
            "instruction_difficulty",
            self.cfg.prompts_dir,
            response_model=DifficultyRatings,
            **difficulty_vars(row["caption"] or "", its),
        )

        def check(reply: DifficultyRatings, n: int = len(its)) -> list[str]:
            got = sorted(r.index for r in reply.ratings)
            return [] if got == list(range(n)) else [f"rate each index 0..{n - 1} once"]

        return req, check

    def edit_rows(
        self, row: dict[str, Any], its: list[dict[str, Any]], o: Outcome, r: Outcome | None
    ) -> list[dict[str, Any]]:
        ratings = {x.index: x.difficulty for x in r.parsed().ratings} if r and r.ok else {}
        seed = int(rng_for(self.ctx.seed, self.stage.name, row["image_id"]).integers(2**62))
        rows = []
        for k, it in enumerate(its):
            if k in ratings:
                it["difficulty"] = ratings[k]
            rows.append(self.stage.edit_row(row, k, it, seed, **o.trace(), attempts=o.attempts))
        set_usage(rows, [o] + ([r] if r else []))
        return rows

    def run(self, batch: pa.Table, shard: ShardSpec | None) -> list[dict[str, Any]]:
        rows = batch.to_pylist()
        tcfg = self.stage.text_config()
        out: list[dict[str, Any]] = []
        asks: dict[str, tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]] = {}
        items = []
        for i, row in enumerate(rows):
            made = self.prepare(row, out, partial(self.ask, rows, i, tcfg))
            if made is not None:
                req, check, regions, donors = made
                asks[row["image_id"]] = (row, regions, donors)
                items.append((req, check))
        done = self.call(items)
        sets: dict[str, list[dict[str, Any]]] = {}
        for image_id, (row, regions, donors) in asks.items():
            o = done[image_id]
            if not o.ok:
                out.append({**self.stage.set_error(row, ""), **o.trace(), "attempts": o.attempts})
                continue
            its = self.from_replies(row, o, out, partial(self.grounded, row, regions, donors, o))
            if its is not None:
                sets[image_id] = its
        rated: dict[str, Outcome] = {}
        if self.cfg.rate_difficulty_with_llm and sets:
            ratings = []
            for image_id, its in list(sets.items()):
                row = asks[image_id][0]
                rating = self.from_replies(row, done[image_id], out, partial(self.rating, row, its))
                if rating is None:
                    del sets[image_id]  # the photo is an error row in out
                else:
                    ratings.append(rating)
            rated = self.call(ratings)
        for image_id, its in sets.items():
            row, o, r = asks[image_id][0], done[image_id], rated.get(image_id)
            used = [o] + ([r] if r else [])
            out.extend(self.convert(row, used, partial(self.edit_rows, row, its, o, r)))
        return out


class Instructions(StrategyStage[InstructionsConfig]):
    name = "instructions"
    config_model = InstructionsConfig
    reads_config = ("generators",)  # the kinds the edit generators execute (kind_weights)
    # 3: offline instructions skip edits whose target cannot show the change (darken a
    # near-black target, brighten a near-white one)
    version = "3"
    inputs = ("captions",)
    input_columns = ("image_id", "blob", "caption", "entities")
    output_schema = SCHEMA
    key = "instruction_id"
    offline_strategy = InstructionsOffline
    model_strategy = InstructionsModel

    def stage_config(self) -> dict[str, Any]:
        return {**model_stage_config(self.cfg, TEMPLATES), "kinds": self.kind_weights()}

    def read_config_view(self, section: str, value: Any) -> None:
        """The pool matters only through the edit kinds it executes, which ``stage_config``
        covers (``kinds``): a generator added with no new kind recomputes no instructions."""
        return None

    def kind_weights(self) -> dict[str, float]:
        """``kinds`` as configured, or 1 for every kind some edit generator of the pool
        executes (every kind when the pool has no edit generator)."""
        if self.cfg.kinds is not None:
            return dict(self.cfg.kinds)
        kinds: set[str] = set()
        for g in self.config_of("generators", list[GeneratorConfig]):
            if "edit" in g.tasks():
                kinds |= g.edit_kinds()
        return {k: 1.0 for k in sorted(kinds or ALL_KINDS)}

    def text_config(self, splice: bool = True) -> InstructionConfig:
        """The text package's quotas from the stage config (kinds are weights; 0 = never)."""
        c = self.cfg
        weights = self.kind_weights()
        kw = {k: float(weights.get(k, 0.0)) for k in ALL_KINDS}
        if not splice:
            kw["splice"] = 0.0
        return InstructionConfig(
            n_min=c.min_edits, n_max=c.max_edits, family_weights=c.family_weights, kind_weights=kw
        )

    # -- rows (both strategies) -----------------------------------------------------
    def edit_row(
        self, row: dict[str, Any], idx: int, ins: dict[str, Any], seed: int, **trace: Any
    ) -> dict[str, Any]:
        """One edit of a photo's set."""
        return {
            "instruction_id": f"{row['image_id']}-i{idx}",
            "image_id": row["image_id"],
            "blob": row["blob"],
            "caption": row["caption"],
            "idx": idx,
            "text": ins["text"],
            "family": ins["family"],
            "kind": ins["kind"],
            "target": ins["target"],
            "location_hint": ins["location_hint"],
            "bbox": [round(float(v), 4) for v in ins["bbox"]],
            "change_bbox": [round(float(v), 4) for v in ins["change_bbox"]],
            "expected_change": ins["expected_change"],
            "difficulty": int(ins["difficulty"]),
            "params": dumps(ins.get("params") or {}),
            "seed": seed,
            "stage_version": self.version,
            "elapsed_ms": 0.0,
            **trace,
        }

    def set_error(self, row: dict[str, Any], message: str, **trace: Any) -> dict[str, Any]:
        """A photo whose set failed: one error row, keyed as its first edit."""
        return {
            "instruction_id": f"{row['image_id']}-i0",
            "image_id": row["image_id"],
            "blob": row.get("blob"),
            "caption": row.get("caption"),
            "status": "error",
            "error": message,
            "retryable": False,
            "backend": "offline",
            "stage_version": self.version,
            **trace,
        }

    def error_row(self, row: dict[str, Any], message: str, retryable: bool) -> dict[str, Any]:
        """An unexpected failure of a photo, keyed as its first edit like ``set_error``."""
        out = super().error_row(row, message, retryable)
        return {**out, "instruction_id": f"{row['image_id']}-i0"}
