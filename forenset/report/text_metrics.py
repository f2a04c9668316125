"""Explanation diversity: Self-BLEU, Distinct-n, duplicates and entity-mention rate (no NLTK).

Self-BLEU scores each text with BLEU-4 against all the others as references (clipped n-gram
precision, +1 smoothing for n > 1, brevity penalty to the closest reference length) and
averages: high means the explanations repeat each other. Distinct-n is unique n-grams over
all n-grams of the corpus: low means templated text.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from forenset.text.checks import repeated_ngrams

_TOKEN = re.compile(r"[a-z0-9']+")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def ngrams(toks: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(toks[i : i + n]) for i in range(len(toks) - n + 1))


def bleu(hyp: Sequence[str], refs: Sequence[Sequence[str]], max_n: int = 4) -> float:
    """Sentence BLEU of ``hyp`` against ``refs`` (smoothed, so short texts do not score 0)."""
    if not hyp or not refs:
        return 0.0
    logs = []
    for n in range(1, max_n + 1):
        h = ngrams(hyp, n)
        total = sum(h.values())
        if total == 0:
            break
        best: Counter[tuple[str, ...]] = Counter()
        for r in refs:
            for g, c in ngrams(r, n).items():
                if c > best[g]:
                    best[g] = c
        match = sum(min(c, best[g]) for g, c in h.items())
        if n == 1:
            if match == 0:
                return 0.0
            logs.append(math.log(match / total))
        else:
            logs.append(math.log((match + 1) / (total + 1)))
    closest = min((len(r) for r in refs), key=lambda L: (abs(L - len(hyp)), L))
    bp = 1.0 if len(hyp) > closest else math.exp(1 - closest / len(hyp))
    return bp * math.exp(sum(logs) / len(logs))


def self_bleu(texts: Sequence[str], max_texts: int = 150) -> float | None:
    """Mean BLEU-4 of each text against the rest (the first ``max_texts`` texts); None if < 2."""
    toks = [tokens(t) for t in texts[:max_texts] if t]
    if len(toks) < 2:
        return None
    scores = [bleu(t, toks[:i] + toks[i + 1 :]) for i, t in enumerate(toks)]
    return sum(scores) / len(scores)


def distinct_n(texts: Sequence[str], n: int = 2) -> float | None:
    grams: Counter[tuple[str, ...]] = Counter()
    for t in texts:
        grams.update(ngrams(tokens(t or ""), n))
    total = sum(grams.values())
    return len(grams) / total if total else None


def mention_rate(mentions: Sequence[Sequence[str] | None]) -> float | None:
    """Share of explanations that name at least one scene entity."""
    if not mentions:
        return None
    return sum(1 for m in mentions if m) / len(mentions)


def duplicate_share(texts: Sequence[str]) -> float | None:
    """Share of texts that repeat an earlier text of the set word for word: (n - distinct) / n."""
    if not texts:
        return None
    return 1 - len(set(texts)) / len(texts)


def diversity(items: Sequence[tuple[str, str, str]]) -> list[list[Any]]:
    """Per (split, kind) of ``(split, kind, text)`` items: n, distinct texts, the share of
    duplicates, Distinct-2 and the number of texts that repeat a 4-word phrase inside
    themselves (a template defect: "in the middle left ... in the middle left")."""
    by: dict[tuple[str, str], list[str]] = {}
    for split, kind, text in items:
        by.setdefault((split, kind), []).append(text or "")
    return [
        [
            split,
            kind,
            len(texts),
            len(set(texts)),
            duplicate_share(texts),
            distinct_n(texts, 2),
            sum(1 for t in texts if repeated_ngrams(t)),
        ]
        for (split, kind), texts in sorted(by.items())
    ]


DIVERSITY_HEADERS = (
    "split",
    "kind",
    "n",
    "distinct texts",
    "duplicate share",
    "Distinct-2",
    "repeated 4-gram",
)
