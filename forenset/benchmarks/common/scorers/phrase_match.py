"""Deterministic entity / evidence extraction and coverage for the offline evaluator.

A stand-in for the paper's LLM evaluator (App. 15.0.0.1–15.0.0.2) that needs no model: it
follows the same definitions with rules instead of judgment, so it is a baseline, not a
replacement. Version ``phrase-match-v1``; any change to the rules or word lists below must
bump :data:`MODEL`, since scores computed with different rules are not comparable.

* An explanation is cut into clauses (sentence ends, ``;``, ``:``, commas, and/but/while).
* A clause carries *evidence* when it contains a visual-cue word; the cue words are grouped in
  families (``blur``, ``warp``, ``lighting`` ...), so "smeared" and "blurry" are one observation.
* Its *entity* is the first noun-phrase run of the clause: consecutive content words
  (``forenset.text.lexicon`` lemmas, stopwords and cue/verb words excluded), with layout and
  colour modifiers dropped. A clause with a cue but no entity ("it looks smeared") is linked to
  the previous clause's entity, like a pronoun.
* Only entities that carry evidence are diagnostic (the paper excludes entities not tied to a
  visual cue). Entities with the same lemmas are merged; so are identical claims.
* Coverage: an entity is supported by a target text when at least half of its lemmas occur in
  the target (wording varies, heads usually survive: "sign text" ~ "sign letters"); a claim is
  supported only when one of the target's own claims (same extraction) names that entity and
  shares a cue family: evidence-sensitive, as App. 15.0.0.2 asks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from forenset.text.lexicon import MODIFIERS, STOPWORDS, lemma, tokens

MODEL = "phrase-match-v1"

# Visual-cue families: words (lemmas) that state what is wrong, or right, about an entity.
CUE_FAMILIES: dict[str, list[str]] = {
    "blur": (
        "blur blurry blurred blurring smear smeared smudge smudged smudgy soft softened hazy "
        "fuzzy unsharp muddy"
    ).split(),
    "smooth": "smooth smoothed waxy plastic plasticky airbrushed glossy featureless".split(),
    "warp": (
        "warp warped warping distort distorted distortion bent bend bending stretched stretch "
        "skewed skew twisted deformed deformation melted melting wavy crooked curved"
    ).split(),
    "text": "garbled illegible misspelled gibberish scrambled jumbled nonsensical".split(),
    "boundary": (
        "seam seams halo halos fringe fringing jagged aliased aliasing cutout pasted paste "
        "blending blended abrupt outline"
    ).split(),
    "lighting": (
        "lit unlit lighting illumination overexposed underexposed glow glowing highlight "
        "highlights brightness darker brighter"
    ).split(),
    "shadow": "shadowless unshadowed".split(),
    "mismatch": (
        "inconsistent inconsistency mismatch mismatched mismatching wrong contradict "
        "contradicts contradictory differ differs different match"
    ).split(),
    "repeat": (
        "repeated repeat repeating repetitive duplicated duplicate duplicate cloned clone "
        "identical tiled copied"
    ).split(),
    "missing": "missing absent vanished removed erased extra additional".split(),
    "implausible": (
        "unnatural implausible impossible unrealistic odd strange weird artificial "
        "anomalous anomaly floating float misplaced misaligned misalignment"
    ).split(),
    "noise": "noise noisy grain grainy artifact artifacts artefact artefacts pixelated blocky".split(),
    "colour": "oversaturated saturated desaturated tinted discoloured discolored uniform flat".split(),
    "perspective": "perspective proportion proportions scale oversized undersized".split(),
    "natural": (
        "natural consistent plausible realistic coherent sharp crisp detailed continuous"
    ).split(),
}
CUE_OF: dict[str, str] = {lemma(w): fam for fam, words in CUE_FAMILIES.items() for w in words}

# Words that are neither entities nor cues: verbs of appearance and judgment, vague nouns.
NON_ENTITY = frozenset(
    lemma(w)
    for w in (
        "appear appears look looks seem seems show shows suggest suggests indicate indicates "
        "reveal reveals give gives make makes cause causes look like likely clearly visible "
        "fall falls cast casts sit sits stand stands hang hangs meet meets follow follows "
        "continue continues lie lies "
        "run runs reach reaches change changes become becomes remain remains "
        "manipulation manipulated edited edit generated synthetic ai fake real authentic "
        "genuine evidence indication cue cues way ways thing things kind "
        "rather quite somewhat slightly heavily overall especially particularly also even "
        "should would not don't doesn't isn't aren't"
    ).split()
)
# -ing / -ed words that are usually nouns (everything else ending so is a verb form or cue).
_NOUN_ING_ED = frozenset(
    "ceiling building clothing painting railing ring string wing earring awning sibling "
    "bed shed sled seed reed speed feed weed".split()
)
_CLAUSE = re.compile(r"[.!?;:\n]+|,|\b(?:and|but|while|whereas|although|though|because)\b", re.I)
_SENTENCE = re.compile(r"[.!?\n]+")


@dataclass(frozen=True)
class Entity:
    name: str
    lemmas: tuple[str, ...]


@dataclass(frozen=True)
class Claim:
    entity: int | None  # index into Extraction.entities
    text: str
    cues: frozenset[str]


@dataclass(frozen=True)
class Extraction:
    entities: tuple[Entity, ...]
    claims: tuple[Claim, ...]


def _nominal(lem: str) -> bool:
    if lem in STOPWORDS or lem in NON_ENTITY or lem in CUE_OF or lem.isdigit():
        return False
    if lem.endswith("ly"):
        return False
    if lem.endswith(("ing", "ed")) and lem not in _NOUN_ING_ED:
        return False
    return True


def cue_families(text: str) -> frozenset[str]:
    """The cue families a piece of text expresses."""
    return frozenset(CUE_OF[lem] for lem in (lemma(t) for t in tokens(text)) if lem in CUE_OF)


def _head_lemmas(text: str) -> tuple[str, ...]:
    return tuple(w for w in (lemma(t) for t in tokens(text)) if _nominal(w) and w not in MODIFIERS)


def first_entity(text: str) -> tuple[str, ...]:
    """Lemmas of the first noun-phrase run in text, modifiers dropped; () if there is none.

    A run made only of modifiers ("the left side") does not count; the next run is tried.
    """
    run: list[str] = []
    for lem in [*(lemma(t) for t in tokens(text)), ""]:  # "" ends the last run
        if lem and _nominal(lem):
            run.append(lem)
            continue
        kept = tuple(w for w in run if w not in MODIFIERS)
        if kept:
            return kept
        run = []
    return ()


def clauses(text: str) -> list[str]:
    return [c.strip() for c in _CLAUSE.split(text) if c and c.strip()]


@lru_cache(maxsize=4096)  # a target is re-read for every claim judged against it
def extract(text: str) -> Extraction:
    """Diagnostic entities and entity-linked evidence claims of one explanation (immutable)."""
    entities: list[Entity] = []
    index: dict[tuple[str, ...], int] = {}
    claims: list[Claim] = []
    seen: set[tuple[int | None, str]] = set()
    last: int | None = None
    for clause in clauses(text):
        lems = first_entity(clause)
        cues = cue_families(clause)
        if lems:
            if lems not in index:
                index[lems] = len(entities)
                entities.append(Entity(" ".join(lems), lems))
            last = index[lems]
        if not cues:
            continue
        key = (last, clause.lower())
        if key not in seen:
            seen.add(key)
            claims.append(Claim(last, clause, cues))
    # Keep only entities that carry evidence, renumbered in order of appearance.
    used = sorted({c.entity for c in claims if c.entity is not None})
    new = {old: i for i, old in enumerate(used)}
    return Extraction(
        entities=tuple(entities[i] for i in used),
        claims=tuple(
            Claim(None if c.entity is None else new[c.entity], c.text, c.cues) for c in claims
        ),
    )


def _supports_entity(entity_lemmas: tuple[str, ...], target_lemmas: set[str]) -> bool:
    if not entity_lemmas:
        return False
    hits = sum(w in target_lemmas for w in entity_lemmas)
    return 2 * hits >= len(entity_lemmas)


def entity_supported(name: str, target: str) -> bool:
    """cover(e | G, y) for an entity: at least half its content lemmas occur in the target."""
    return _supports_entity(_head_lemmas(name), {lemma(t) for t in tokens(target)})


def claim_supported(entity_name: str | None, claim: str, target: str) -> bool:
    """cover(v | G, y) for a claim: a claim of the target shares a cue family and the entity.

    The target's claims come from :func:`extract`, so "the hands are fine, the sign is blurry"
    does not support "the hands are blurry": the same object with another reason earns entity
    credit only (App. 15.0.0.2). A claim without an entity needs only the cue family.
    """
    cues = cue_families(claim)
    if not cues:
        return False
    lems = _head_lemmas(entity_name) if entity_name else ()
    ex = extract(target)
    for tc in ex.claims:
        if not tc.cues & cues:
            continue
        if not lems:
            return True
        words = {lemma(t) for t in tokens(tc.text)}
        if tc.entity is not None:
            words |= set(ex.entities[tc.entity].lemmas)
        if _supports_entity(lems, words):
            return True
    return False
