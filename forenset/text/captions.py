"""Caption checks (XPlainVerse step 1): dense, factual, no speculation."""

from __future__ import annotations

import re

from forenset.text.lexicon import tokens

# Hedging that a factual caption must not contain (word-boundary, case-insensitive).
SPECULATION_PATTERNS: tuple[str, ...] = (
    r"probably",
    r"maybe",
    r"perhaps",
    r"possibly",
    r"presumably",
    r"apparently",
    r"likely",
    r"unlikely",
    r"seems?(?: to)?",
    r"seemingly",
    r"appears? to",
    r"might",
    r"could be",
    r"may be",
    r"must be",
    r"i think",
    r"i believe",
    r"i guess",
    r"it looks like",
    r"looks as if",
    r"as if",
    r"suggests?",
    r"suggesting",
    r"implies",
    r"possible",
    r"unclear",
    r"hard to tell",
    r"guess",
    r"assume",
)
_SPECULATION = re.compile(r"\b(" + "|".join(SPECULATION_PATTERNS) + r")\b", re.IGNORECASE)
_META = re.compile(r"\b(as an ai|i cannot|i can't|i'm unable|sorry)\b", re.IGNORECASE)


def speculation_terms(text: str) -> list[str]:
    """Hedging phrases found in text, lower-cased, in order of appearance."""
    return [m.group(0).lower() for m in _SPECULATION.finditer(text)]


def validate_caption(
    caption: str,
    min_words: int = 25,
    max_words: int = 160,
    min_entities: int = 0,
    entities: list[str] | None = None,
) -> list[str]:
    """Reasons the caption fails the caption contract; empty list = valid."""
    failures: list[str] = []
    text = (caption or "").strip()
    if not text:
        return ["caption is empty"]
    n = len(tokens(text))
    if n < min_words:
        failures.append(f"caption has {n} words, fewer than {min_words}")
    if n > max_words:
        failures.append(f"caption has {n} words, more than {max_words}")
    spec = speculation_terms(text)
    if spec:
        failures.append(f"caption speculates: {sorted(set(spec))}")
    if _META.search(text):
        failures.append("caption contains a refusal or assistant meta-text")
    if entities is not None and len(entities) < min_entities:
        failures.append(f"caption lists {len(entities)} entities, fewer than {min_entities}")
    return failures
