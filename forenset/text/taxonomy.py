"""Safety taxonomy (after SafeIMG): 12 categories as data, and scenario sampling S_c.

The data lives in forenset/prompts/taxonomy.yaml; ``taxonomy_hash()`` is the sha256 of that file,
to be fed into the scenarios/prompts stage fingerprints.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, Field, model_validator

from forenset.text.templates import PROMPTS_DIR

TAXONOMY_PATH = PROMPTS_DIR / "taxonomy.yaml"
SLOT_NAMES = ("who", "where", "why", "how", "details")


class Item(BaseModel):
    """A vocabulary entry; ``media`` lists the media forms it fits (empty = all)."""

    text: str
    media: list[str] = Field(default_factory=list)
    # Slot values that replace the category's when this item is chosen (content items: any
    # slot; who items: why) - keeps people, place, cause and details coherent.
    who: list[str] = Field(default_factory=list)
    where: list[str] = Field(default_factory=list)
    why: list[str] = Field(default_factory=list)
    how: list[str] = Field(default_factory=list)
    details: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _from_str(cls, v: object) -> object:
        return {"text": v} if isinstance(v, str) else v

    def fits(self, media_form: str) -> bool:
        return not self.media or media_form in self.media


def fitting(items: list[Item], media_form: str) -> list[Item]:
    """Items that suit a media form (all items when none is tagged for it)."""
    return [i for i in items if i.fits(media_form)] or list(items)


class Slots(BaseModel):
    """Slot vocabularies the offline 5W+1H constructor draws from."""

    who: list[Item] = Field(min_length=3)
    where: list[Item] = Field(min_length=3)
    why: list[Item] = Field(min_length=3)
    how: list[Item] = Field(min_length=3)
    details: list[Item] = Field(min_length=3)


class Category(BaseModel):
    id: str
    group: Literal["public", "individual"]
    name: str
    evidentiary_function: str
    risk_summary: str
    contents: list[Item] = Field(min_length=4)
    media_forms: list[str] = Field(min_length=2)
    slots: Slots
    constraints: list[str] = Field(default_factory=list)
    synthetic_values: list[str] = Field(default_factory=list)
    # How the offline constructor phrases the who / why slots, and notes it appends to prompts.
    who_frame: str = "In view: {who}."
    why_frame: str = "It happened because of {why}."
    prompt_notes: list[str] = Field(default_factory=list)
    # Filled from the file's group_constraints at load time.
    group_constraints: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _media_tags_known(self) -> Category:
        items = list(self.contents)
        for name in SLOT_NAMES:
            items += getattr(self.slots, name)
        for it in items:
            bad = sorted(set(it.media) - set(self.media_forms))
            if bad:
                raise ValueError(f"{self.id}: item {it.text!r} names unknown media forms {bad}")
        return self

    def content_item(self, text: str) -> Item | None:
        return next((c for c in self.contents if c.text == text), None)

    @property
    def requires_time_cue(self) -> bool:
        return self.group == "public"

    @property
    def forbids_placeholders(self) -> bool:
        return bool(self.synthetic_values)

    def all_constraints(self) -> list[str]:
        """A_c: the group's constraints followed by the category's own."""
        return list(self.group_constraints) + list(self.constraints)


class Scenario(BaseModel):
    """One instance s = (R_c, e, m) of a category's scenario space, plus one concrete detail."""

    scenario_id: str
    category: str
    group: str
    risk_summary: str
    content: str
    media_form: str
    detail: str = ""
    risk_focus: str = ""
    source: Literal["template", "llm"] = "template"


class Taxonomy(BaseModel):
    version: int
    universal_rules: list[str]
    time_cues: list[str]
    media_how: dict[str, list[str]] = Field(default_factory=dict)
    categories: list[Category]


def _read(path: Path) -> Taxonomy:
    # libyaml when present: the taxonomy is read by every build's planning (~0.4 s in Python)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - a safe loader
    groups = data.get("group_constraints", {})
    cats = []
    for c in data["categories"]:
        c = dict(c)
        c["group_constraints"] = list(groups.get(c["group"], []))
        cats.append(Category.model_validate(c))
    return Taxonomy(
        version=int(data["version"]),
        universal_rules=list(data["universal_rules"]),
        time_cues=list(data["time_cues"]),
        media_how=dict(data.get("media_how", {})),
        categories=cats,
    )


@lru_cache(maxsize=8)
def _cached(path: str, mtime_ns: int) -> Taxonomy:
    return _read(Path(path))


def load_full_taxonomy(path: str | Path | None = None) -> Taxonomy:
    p = Path(path) if path is not None else TAXONOMY_PATH
    return _cached(str(p), p.stat().st_mtime_ns)


def load_taxonomy(path: str | Path | None = None) -> list[Category]:
    """The 12 categories (P1-P8 public, I1-I4 individual) in file order."""
    return list(load_full_taxonomy(path).categories)


def get_category(category_id: str, path: str | Path | None = None) -> Category:
    for c in load_taxonomy(path):
        if c.id == category_id:
            return c
    raise KeyError(f"unknown safety category {category_id!r}")


def taxonomy_hash(path: str | Path | None = None) -> str:
    p = Path(path) if path is not None else TAXONOMY_PATH
    return hashlib.sha256(p.read_bytes()).hexdigest()


def scenario_id(category: str, content: str, media_form: str, detail: str) -> str:
    blob = json.dumps([category, content, media_form, detail], ensure_ascii=False)
    return f"{category}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def make_scenario(
    category: Category,
    content: str,
    media_form: str,
    detail: str = "",
    risk_focus: str = "",
    source: Literal["template", "llm"] = "template",
) -> Scenario:
    return Scenario(
        scenario_id=scenario_id(category.id, content, media_form, detail),
        category=category.id,
        group=category.group,
        risk_summary=category.risk_summary,
        content=content,
        media_form=media_form,
        detail=detail,
        risk_focus=risk_focus or category.risk_summary,
        source=source,
    )


def sample_scenarios(category: Category, rng: np.random.Generator, n: int) -> list[Scenario]:
    """n scenario instances from S_c = {(R_c, e, m)}: distinct compatible (content, media form)
    pairs while the space allows, then further passes; each gets one concrete detail that fits
    its media form."""
    pairs = [(e.text, m) for e in category.contents for m in category.media_forms if e.fits(m)]
    out: list[Scenario] = []
    while len(out) < n:
        order = rng.permutation(len(pairs))
        for j in order[: n - len(out)]:
            e, m = pairs[int(j)]
            item = next(c for c in category.contents if c.text == e)
            details = [Item(text=t) for t in item.details] or fitting(category.slots.details, m)
            detail = details[int(rng.integers(len(details)))].text
            out.append(make_scenario(category, e, m, detail))
    return out


# -- a real image's category from its words (SafeIMG's D_real is drawn per category) ------------

_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


def _stem(word: str) -> str:
    """Simple verb endings off, so "flooded" and "flooding" meet "flood"."""
    for end in ("ing", "ed"):
        if word.endswith(end) and len(word) - len(end) >= 4:
            return word[: -len(end)]
    return word


def words(text: str) -> set[str]:
    """Content words of a caption or file name: the lexicon's content lemmas (stop words,
    colours, sides and sizes dropped), CamelCase and _ split, verb endings off."""
    from forenset.text.lexicon import content_lemmas

    text = _CAMEL.sub(" ", text.replace("_", " ").replace("-", " "))
    return {_stem(w) for w in content_lemmas(text) if len(w) >= 3 and w.isalpha()}


@lru_cache(maxsize=4)
def _category_terms(path: str) -> tuple[dict[str, set[str]], dict[str, float]]:
    """Each category's vocabulary and each word's weight log(C / df): a word of one category
    weighs most. The vocabulary is what the category is about (its name and content items:
    "urban road flooding", "a till receipt"), not the slots' people, places and details,
    whose colours, sides and textures any photograph's caption shares by chance."""
    terms: dict[str, set[str]] = {}
    for c in load_taxonomy(path):
        texts = [c.name] + [i.text for i in c.contents]
        terms[c.id] = set().union(*(words(t) for t in texts))
    df: dict[str, int] = {}
    for ws in terms.values():
        for w in ws:
            df[w] = df.get(w, 0) + 1
    return terms, {w: float(np.log(len(terms) / n)) for w, n in df.items()}


def match_category(
    text: str, path: str | Path | None = None, min_words: int = 2
) -> tuple[str | None, list[str]]:
    """The category whose vocabulary shares the most weight with ``text``'s words, and the
    shared words; (None, []) when fewer than ``min_words`` specific words are shared or two
    categories tie.

    Only words of at most a quarter of the categories count, so words many scenes share
    ("street", "road") decide nothing, and one shared word is chance: no match is an honest
    "uncategorised", never a guess."""
    terms, weight = _category_terms(str(path or TAXONOMY_PATH))
    specific = np.log(4.0)
    mine = words(text)
    scored = sorted(
        (
            (round(sum(weight[w] for w in shared), 9), cid, sorted(shared))
            for cid, ws in terms.items()
            if len(shared := {w for w in mine & ws if weight[w] >= specific}) >= min_words
        ),
        key=lambda t: (-t[0], t[1]),
    )
    if not scored or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None, []
    return scored[0][1], scored[0][2]
