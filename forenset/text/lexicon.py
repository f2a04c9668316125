"""Small English normalisation: tokens, plural-insensitive lemmas, content words.

A rule-based singulariser (no NLTK in the env); both sides of every comparison go through the
same function, so consistency matters more than linguistic perfection.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

IRREGULAR = {
    "men": "man",
    "women": "woman",
    "children": "child",
    "people": "person",
    "persons": "person",
    "feet": "foot",
    "teeth": "tooth",
    "mice": "mouse",
    "geese": "goose",
    "oxen": "ox",
    "leaves": "leaf",
    "knives": "knife",
    "wives": "wife",
    "lives": "life",
    "shelves": "shelf",
    "wolves": "wolf",
    "halves": "half",
    "loaves": "loaf",
    "scarves": "scarf",
    "calves": "calf",
    "dice": "die",
    "cacti": "cactus",
    "fungi": "fungus",
}
# Words ending in s that are already singular.
_KEEP_S = {
    "bus",
    "gas",
    "glass",
    "grass",
    "dress",
    "class",
    "boss",
    "cross",
    "mass",
    "press",
    "lens",
    "canvas",
    "cactus",
    "bonus",
    "status",
    "virus",
    "campus",
    "walrus",
    "octopus",
    "iris",
    "chess",
    "moss",
    "trousers",
    "jeans",
    "glasses",
    "scissors",
    "news",
    "series",
    "species",
    "is",
    "was",
    "has",
    "this",
    "its",
    "us",
    "yes",
    "as",
    "his",
    "hers",
    "plus",
    "always",
    "across",
    "perhaps",
    "lotus",
    "atlas",
    "circus",
    "axis",
    "basis",
    "bias",
    "thesis",
    "pants",
}

STOPWORDS = frozenset(
    """a an the of in on at to for from by with and or but is are was were be been being it its
    this that these those there their his her him he she they them we our you your i me my
    into onto over under near beside behind above below between through while as than then so
    up down out off very some any each every other another one two three four five both all
    which who whom whose what where when why how has have had do does did not no nor can
    could would should will shall may might also just only own same such too s image photo
    photograph picture scene""".split()
)
# Modifiers that do not identify an entity by themselves (grounding ignores them).
MODIFIERS = frozenset(
    """left right upper lower top bottom middle center centre central front back rear side
    foreground background small large big tiny huge little tall short long wide narrow
    dark light bright pale red orange yellow green blue purple violet pink brown black white
    grey gray golden silver beige cyan magenta teal maroon navy olive region area part patch
    corner edge half portion section spot zone whole entire main""".split()
)


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; possessive 's is dropped ("man's" -> "man")."""
    out = []
    for tok in _TOKEN.findall(text.lower()):
        out.append(tok[:-2] if tok.endswith("'s") else tok)
    return out


def lemma(word: str) -> str:
    """Plural-insensitive form of one lower-case word."""
    w = word.lower()
    if w in IRREGULAR:
        return IRREGULAR[w]
    if len(w) <= 3 or w in _KEEP_S or not w.endswith("s") or w.endswith(("ss", "us", "is")):
        return w
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith(("ches", "shes", "xes", "zes", "sses", "oes")):
        return w[:-2]
    return w[:-1]


def lemmas(text: str) -> list[str]:
    return [lemma(t) for t in tokens(text)]


def content_lemmas(text: str, drop_modifiers: bool = True) -> list[str]:
    """Lemmas of words that can name an entity (stopwords, and optionally modifiers, dropped)."""
    out = []
    for lem in lemmas(text):
        if lem in STOPWORDS or lem.isdigit():
            continue
        if drop_modifiers and lem in MODIFIERS:
            continue
        out.append(lem)
    return out


def contains_term(text: str, term: str) -> bool:
    """Whole-word, plural-insensitive match of a (possibly multi-word) term in text."""
    hay = lemmas(text)
    needle = lemmas(term)
    if not needle:
        return False
    n = len(needle)
    return any(hay[i : i + n] == needle for i in range(len(hay) - n + 1))
