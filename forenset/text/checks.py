"""Validators for the other LLM replies (differences, judge, explanations); failure lists.

Pydantic already enforces types and ranges; these check what a schema cannot: internal
consistency and the explanation style contracts. Empty list = valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from forenset.text.captions import speculation_terms
from forenset.text.lexicon import contains_term, content_lemmas, lemmas, tokens
from forenset.text.models import (
    AlignmentJudgment,
    AuthenticityExplanation,
    ComplexExplanation,
    SimpleExplanation,
    VisualDifferences,
)

# Words a lay reader should not meet in a simple explanation.
JARGON: tuple[str, ...] = (
    "artifact",
    "artefact",
    "pixel",
    "compression",
    "diffusion",
    "gan",
    "latent",
    "inpainting",
    "frequency",
    "noise pattern",
    "interpolation",
    "upsampling",
    "jpeg",
    "metadata",
    "exif",
    "chromatic aberration",
    "model",
    "algorithm",
)
# Explanations must not lean on what the image cannot show.
NON_VISUAL: tuple[str, ...] = ("metadata", "exif", "file name", "reference image", "instruction")


def _parse(model: type[BaseModel], reply: Any) -> Any:
    return reply if isinstance(reply, model) else model.model_validate(reply)


def validate_differences(reply: VisualDifferences | Mapping[str, Any]) -> list[str]:
    r = _parse(VisualDifferences, reply)
    out = []
    if r.identical and r.differences:
        out.append("identical is true but differences are listed")
    for i, d in enumerate(r.differences):
        if not content_lemmas(d.region):
            out.append(f"{i}: region {d.region!r} names no concrete entity or area")
        if len(d.description.split()) < 3:
            out.append(f"{i}: description too short")
        if d.bbox is not None:
            x0, y0, x1, y1 = d.bbox
            if not (0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1):
                out.append(f"{i}: bbox {d.bbox} is not a normalised box")
    return out


def validate_judgment(reply: AlignmentJudgment | Mapping[str, Any], tol: float = 0.05) -> list[str]:
    r = _parse(AlignmentJudgment, reply)
    out = []
    if r.final_score > r.match_score + tol:
        out.append("final_score exceeds match_score")
    if r.verdict == "KEEP" and r.failure_category != "none":
        out.append("KEEP verdict with a failure category")
    if r.verdict == "DISCARD" and r.failure_category == "none":
        out.append("DISCARD verdict without a failure category")
    if r.verdict == "KEEP" and r.offtarget_penalty > 0.5:
        out.append("KEEP verdict although off-target changes dominate")
    if not r.rationale.strip():
        out.append("rationale is empty")
    return out


def repeated_ngrams(text: str, n: int = 4) -> list[str]:
    """Word n-grams (lower-cased, punctuation stripped) that occur more than once in ``text``:
    a label that says "in the upper left in the upper left" reads as a template defect."""
    toks = tokens(text)
    seen: set[tuple[str, ...]] = set()
    out: dict[tuple[str, ...], None] = {}
    for i in range(len(toks) - n + 1):
        g = tuple(toks[i : i + n])
        if g in seen:
            out[g] = None
        seen.add(g)
    return [" ".join(g) for g in out]


def _explanation_common(text: str, min_words: int, max_words: int) -> list[str]:
    out = []
    n = len(tokens(text))
    if n < min_words:
        out.append(f"explanation has {n} words, fewer than {min_words}")
    if n > max_words:
        out.append(f"explanation has {n} words, more than {max_words}")
    spec = speculation_terms(text)
    if spec:
        out.append(f"explanation hedges: {sorted(set(spec))}")
    nv = [t for t in NON_VISUAL if contains_term(text, t)]
    if nv:
        out.append(f"explanation cites non-visual sources: {nv}")
    return out


def _cues_in_text(cues: list, text: str) -> list[str]:
    vocab = set(lemmas(text))
    out = []
    for i, c in enumerate(cues):
        words = content_lemmas(c.entity)
        if words and not set(words) & vocab:
            out.append(f"cue {i}: entity {c.entity!r} is not mentioned in the explanation")
    return out


def validate_complex_explanation(
    reply: ComplexExplanation | Mapping[str, Any],
    min_words: int = 40,
    max_words: int = 220,
) -> list[str]:
    r = _parse(ComplexExplanation, reply)
    return _explanation_common(r.explanation, min_words, max_words) + _cues_in_text(
        r.cues, r.explanation
    )


def validate_authenticity_explanation(
    reply: AuthenticityExplanation | Mapping[str, Any],
    min_words: int = 30,
    max_words: int = 180,
) -> list[str]:
    r = _parse(AuthenticityExplanation, reply)
    return _explanation_common(r.explanation, min_words, max_words) + _cues_in_text(
        r.cues, r.explanation
    )


def validate_simple_explanation(
    reply: SimpleExplanation | Mapping[str, Any],
    max_words: int = 40,
) -> list[str]:
    r = _parse(SimpleExplanation, reply)
    out = _explanation_common(r.explanation, 5, max_words)
    jargon = [t for t in JARGON if contains_term(r.explanation, t)]
    if jargon:
        out.append(f"simple explanation uses jargon: {jargon}")
    words = content_lemmas(r.entity)
    if words and not set(words) & set(lemmas(r.explanation)):
        out.append(f"entity {r.entity!r} is not mentioned in the explanation")
    if r.explanation.count(".") > 2:
        out.append("simple explanation has more than two sentences")
    return out
