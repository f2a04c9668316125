"""Reading a reply to a public benchmark's question: the real/fake verdict of a judgement, the
option letter of a multiple choice, the text scored as the explanation. One rule for every
benchmark and responder, so numbers compare across them; an unreadable reply is wrong (never
a guess: LOKI's own script picks a random letter there, we count it wrong and say why).
"""

from __future__ import annotations

import re

from forenset.benchmarks.common.answers import parse_answer

NO_VERDICT = "the reply names neither real nor fake, or both, in its first sentence and in all"
NO_CHOICE = "the reply names no option letter or option text"
_REAL = re.compile(r"\breal\b")
_FAKE = re.compile(r"\bfake\b")


def _keyword(text: str) -> str | None:
    r, f = bool(_REAL.search(text)), bool(_FAKE.search(text))
    return "real" if r and not f else "fake" if f and not r else None


def verdict(reply: str | None, asks: str | None = None) -> tuple[str | None, str | None]:
    """(real | fake | None, why None). In order: an ``<answer>`` tag; for a yes/no question
    (``asks``: what it asks about) LOKI's rule (the reply is yes/no, or its first four
    characters hold one); FakeVLM's rule (the first sentence names one of real / fake); the
    whole reply naming exactly one."""
    text = (reply or "").strip()
    if not text:
        return None, "the reply is empty"
    low = text.lower()
    if "<answer" in low:
        p = parse_answer(text)
        if p.answer:
            return p.answer, None
    if asks in ("real", "fake"):
        t = low.replace(".", "").strip()
        yes = t in ("yes", "y") or (len(t) > 1 and "yes" in t[:4])
        no = t in ("no", "n") or (len(t) > 1 and not yes and "no" in t[:4])
        if yes or no:
            other = "real" if asks == "fake" else "fake"
            return (asks if yes else other), None
    first = re.split(r"[.!?\n]", low, maxsplit=1)[0]
    got = _keyword(first) or _keyword(low)
    return (got, None) if got else (None, NO_VERDICT)


def choice(reply: str | None, choices: list[str]) -> tuple[str | None, str | None]:
    """(option letter | None, why None): ``(A)``, ``**A**``, a standalone ``A`` or ``A.``; the
    last one named wins when several are; else the option's text named in the reply."""
    text = " " + (reply or "").strip().strip(",.!?;:'") + " "
    letters = [chr(ord("A") + i) for i in range(len(choices))]
    found: list[tuple[int, str]] = []
    for x in letters:
        for pat in (rf"\({x}\)", rf"\*\*{x}\*\*", rf"(?<![A-Za-z]){x}(?=[\s.):,])"):
            found += [(m.start(), x) for m in re.finditer(pat, text)]
    if found:
        return max(found)[1], None
    low = text.lower()
    named = [(low.rfind(c.lower().strip(" .")), x) for x, c in zip(letters, choices, strict=True)]
    named = [(i, x) for i, x in named if i >= 0]
    if named:
        return max(named)[1], None
    return None, NO_CHOICE


def explanation(reply: str | None) -> str:
    """The text scored against the reference: the ``<reasoning>`` when the reply has one, else
    the whole reply."""
    text = (reply or "").strip()
    if "<reasoning" in text.lower():
        p = parse_answer(text)
        if p.reasoning:
            return p.reasoning
    return text


def constant_reply(belief: str, task: str, asks: str | None) -> str:
    """What a model that judges every image ``belief``, picks the first option and names no
    clue replies."""
    if task == "multiple_choice":
        return "A"
    if task == "explanation":
        return "No clue was examined."
    if asks in ("real", "fake"):
        return "Yes." if asks == belief else "No."
    return f"The image is {belief}. No clue was examined."
