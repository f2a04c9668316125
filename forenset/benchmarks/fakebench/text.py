"""FakeBench (§3) vocabulary: the 14 clue dimensions, the question forms and the answer rules.

Pure data helpers shared by the FakeBench stages (``forenset/benchmarks/fakebench/stages``), the FakeBench
export and the Label Studio task that lets people edit golden clues:

* :data:`DIMENSIONS`: the 14 dimensions of telltale clues (§3.4), in the paper's order.
* How a measured difference maps to dimensions: :data:`CHANGE_TYPE_DIMENSIONS` covers the offline
  pixel differencer's vocabulary (``colour change``, ``brightness change``, ``content change``,
  ``artifact``) *and* the VLM diff backend's ``change_type`` values
  (:data:`forenset.text.models.ChangeType`: added, removed, …); :data:`KIND_DIMENSIONS` the cues
  an edit kind of the offline editor leaves.
* FakeClass (§3.3): three closed question forms, balanced over a set (:func:`fakeclass_forms`),
  and the exact-match rule of §3.2 (:func:`exact_match`).
* FakeQA (§3.5): one open question per dimension (:func:`fakeqa_question`).
* Offline golden clues written from measured differences (:func:`offline_clues`), labelled as
  such by the stage; a model in fault-finding mode writes them when one is configured.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

DIMENSIONS: tuple[str, ...] = (
    "texture",
    "edge",
    "clarity",
    "light & shadow",
    "layout",
    "symmetry",
    "reflection",
    "perspective",
    "shape",
    "theme",
    "content deficiency",
    "distortion",
    "irreality",
    "overall tone",
)

# What a difference of this type looks like to a viewer. The first four are the offline pixel
# differencer's vocabulary (backends/offline_diff.py), the rest the VLM diff backend's
# ``change_type`` values (text/models.py ChangeType); both map, so clues exist either way.
CHANGE_TYPE_DIMENSIONS: dict[str, tuple[str, ...]] = {
    # offline pixel differencer
    "colour change": ("overall tone", "irreality"),
    "brightness change": ("light & shadow",),
    "content change": ("content deficiency",),
    "artifact": ("texture", "clarity"),
    # VLM diff backend
    "added": ("layout", "theme"),
    "removed": ("content deficiency", "texture"),
    "replaced": ("theme", "edge"),
    "recolored": ("overall tone", "irreality"),
    "moved": ("layout", "perspective"),
    "duplicated": ("symmetry", "layout"),
    "reshaped": ("shape", "distortion"),
    "resized": ("perspective", "shape"),
    "lighting": ("light & shadow", "reflection"),
    "texture": ("texture", "clarity"),
    "text": ("irreality", "distortion"),
    "background": ("edge", "light & shadow"),
    "other": ("irreality",),
}
# Which cues an edit of this kind leaves (the manipulation, not the pixel statistics).
KIND_DIMENSIONS: dict[str, tuple[str, ...]] = {
    "copy_move": ("layout", "symmetry"),
    "removal": ("content deficiency", "texture"),
    "recolor": ("irreality", "edge"),
    "local_warp": ("shape", "perspective"),
    "liquify": ("distortion", "shape"),
    "splice": ("edge", "light & shadow", "theme"),
    "lighting": ("light & shadow", "reflection", "overall tone"),
}


def dimensions_for(change_type: str | None, kind: str | None = None) -> list[str]:
    """Kind cues first, then change-type cues, de-duplicated, in order of first appearance."""
    found = list(KIND_DIMENSIONS.get(kind or "", ())) + list(
        CHANGE_TYPE_DIMENSIONS.get((change_type or "").strip().lower(), ())
    )
    return list(dict.fromkeys(found))


# -- FakeClass (§3.3, Fig. 4a) -------------------------------------------------------------------
FORM_YES_NO = "yes_no"
FORM_WHAT = "what"
Q_FAKE = "Is this a fake image?"
Q_REAL = "Is this a real image?"
Q_WHAT = "What is the authenticity of this image?"
KEYWORDS = {FORM_YES_NO: ("yes", "no"), FORM_WHAT: ("real", "fake")}


def fakeclass_question(form: str, polarity: str | None, label: str) -> tuple[str, str]:
    """(question, the one correct answer) of one image. ``polarity`` ("fake" | "real") picks the
    yes/no question: "Is this a fake image?" is answered yes for a fake, no for a real."""
    if form == FORM_WHAT:
        return Q_WHAT, label
    if polarity not in ("fake", "real"):
        raise ValueError(f"a yes/no question needs polarity fake or real, not {polarity!r}")
    return (Q_FAKE if polarity == "fake" else Q_REAL), ("yes" if polarity == label else "no")


def fakeclass_forms(n: int) -> list[tuple[str, str | None]]:
    """(form, polarity) for the images of a set in its seeded order: forms alternate yes/no and
    what (balanced to ±1), and yes/no questions alternate asking "fake?" and "real?"."""
    out: list[tuple[str, str | None]] = []
    for i in range(n):
        if i % 2 == 0:
            out.append((FORM_YES_NO, "fake" if (i // 2) % 2 == 0 else "real"))
        else:
            out.append((FORM_WHAT, None))
    return out


def answer_keywords(form: str, reply: str | None) -> set[str]:
    """The authenticity keywords of a reply (§3.2): the form's keywords (yes/no, or real/fake)
    that occur in it as whole words, case-insensitive."""
    if not reply:
        return set()
    pattern = r"\b(" + "|".join(KEYWORDS[form]) + r")\b"
    return {m.group(1) for m in re.finditer(pattern, reply.lower())}


def exact_match(form: str, answer: str, reply: str | None) -> bool:
    """§3.2's exact-match rule: the reply's authenticity keyword must be the answer, and be the
    only one. "fake" to "Is this a fake image?" is wrong (no yes/no), and so is "I cannot answer
    yes or no." (both keywords: no answer is given); "Yes, it looks generated." is right."""
    return answer_keywords(form, reply) == {answer}


# -- FakeClue (§3.4) and FakeQA (§3.5) -----------------------------------------------------------
FAULT_FINDING_QUESTION = "This is a fake image, explain why."
INFERENCE_QUESTION = (
    "Is this image real or fake? Think step by step: examine the image for telltale clues "
    "and reason about them before you decide."
)


def fakeqa_question(dimension: str) -> str:
    """FakeQA's unified open question (§3.5) for one dimension."""
    if dimension not in DIMENSIONS:
        raise ValueError(f"{dimension!r} is not one of FakeBench's 14 dimensions")
    return f"How is the {dimension} regarding the authenticity of this image?"


def clue_text(clues: Sequence[dict[str, str]]) -> str:
    """The golden clue C: the clues as one coherent flow of sentences, in order."""
    parts = []
    for c in clues:
        t = " ".join(str(c["clue"]).split())
        parts.append(t if t.endswith((".", "!", "?")) else t + ".")
    return " ".join(parts)


def by_dimension(clues: Sequence[dict[str, str]]) -> dict[str, str]:
    """FakeQA's golden answers: per dimension, the clues of that dimension joined, in the
    dimensions' order of first appearance."""
    out: dict[str, list[dict[str, str]]] = {}
    for c in clues:
        out.setdefault(c["dimension"], []).append(c)
    return {d: clue_text(cs) for d, cs in out.items()}


# How a measured difference shows in each dimension (the lead of an offline clue).
DIMENSION_CUES: dict[str, str] = {
    "texture": "the texture is smeared or does not match its surroundings",
    "edge": "the edges of the changed area do not follow the objects",
    "clarity": "sharpness and noise differ from the rest of the image",
    "light & shadow": "the brightness and shading do not match the scene's light",
    "layout": "the arrangement of the content looks altered",
    "symmetry": "content is repeated where a real scene would vary",
    "reflection": "reflections and highlights do not agree with the light",
    "perspective": "the geometry does not follow the scene's perspective",
    "shape": "the shape of the content is deformed",
    "theme": "the content does not fit the scene",
    "content deficiency": "content is missing or filled in",
    "distortion": "the content is warped",
    "irreality": "colours or details look unnatural",
    "overall tone": "the colour tone differs from the rest of the image",
}


def offline_clues(
    differences: Sequence[dict[str, Any]], kind: str | None, limit: int = 5
) -> list[dict[str, str]]:
    """Golden clues written from measured differences (no model): one clue per (difference,
    dimension) in salience order, at most ``limit``, each saying what was measured where."""
    ranked = sorted(differences, key=lambda d: -(d.get("salience") or 0))
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for d in ranked:
        where = d.get("region") or "image"
        what = " ".join(str(d.get("description") or d.get("change_type") or "a change").split())
        what = what.rstrip(".")
        for dim in dimensions_for(d.get("change_type"), kind):
            if dim in seen:
                continue
            seen.add(dim)
            out.append(
                {
                    "dimension": dim,
                    "clue": f"At the {where}, {DIMENSION_CUES[dim]} ({what}).",
                }
            )
            if len(out) >= limit:
                return out
    return out


# -- human edits of golden clues (Label Studio) --------------------------------------------------
CLUE_FIELD = "golden_clue"  # the TextArea of the FakeClue Label Studio task


def read_clue_edits(text: str) -> dict[str, str]:
    """Edited golden clues from a Label Studio JSON export of the FakeClue task: sample id ->
    the clue text of the task's last non-cancelled annotation. A task with no annotation, or a
    cancelled (skipped) one, keeps the model's clue and is left out."""
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("a Label Studio JSON export is a list of tasks")
    out: dict[str, str] = {}
    for task in data:
        sid = (task.get("data") or {}).get("sample_id")
        anns = [a for a in task.get("annotations") or [] if not a.get("was_cancelled")]
        if not sid or not anns:
            continue
        for r in anns[-1].get("result") or []:
            if r.get("from_name") == CLUE_FIELD and r.get("type") == "textarea":
                texts = (r.get("value") or {}).get("text") or []
                edited = " ".join(" ".join(t.split()) for t in texts if t.strip())
                if edited:
                    out[str(sid)] = edited
    return out


# -- the fault-finding author's reply (golden clues) ---------------------------------------------
class FakeClue(BaseModel):
    """One telltale clue of a fake image, in one of the 14 dimensions."""

    model_config = ConfigDict(extra="ignore")
    dimension: Literal[DIMENSIONS]  # type: ignore[valid-type]
    clue: str = Field(min_length=1)


class FakeClueSet(BaseModel):
    """The fault-finding reply: the clues revealing that the image is fake (five in FakeBench)."""

    model_config = ConfigDict(extra="ignore")
    clues: list[FakeClue] = Field(min_length=1)
