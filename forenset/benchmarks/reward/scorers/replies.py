"""Parsers of the reward benchmark's two reply formats (XAIGID-RewardBench §3.2, §3.4).

* A policy reply starts with a one-word verdict ('real' or 'fake'), then the explanation:
  ``r = (y, e)``. Leading markdown (``**``), quotes, whitespace and a trailing punctuation mark
  around that first word are tolerated; any other first word leaves ``y`` unparsed (a wrong
  detection downstream), with the reason in one sentence.
* A judge reply starts with one of First / Second / Tie / BothBad ("Both Bad", "Both bad" and
  "Both-bad" read as BothBad), then the elaboration. Only an unambiguous choice is read: the
  word must stand alone (followed by the end, punctuation, a line break or " - "; "First
  response is better" also reads), so a heading such as "First response: Real." is a parse
  error, and so is a reply that gives a second, different verdict on a line of its own or as
  the label BothBad. A nonsense judge must not score as one that chose.
"""

from __future__ import annotations

import re
from typing import NamedTuple

VERDICTS = ("real", "fake")
_LEAD = " \t\r\n\"'`*_#>-:"
_WORD = re.compile(r"[A-Za-z]+")
_CHOICE = re.compile(r"^(first|second|tie|both[\s_-]*bad)\b", re.IGNORECASE)
# what may follow the choice word for it to be a verdict, after closing markdown / quotes
_STANDS_ALONE = re.compile(
    r"[*_`\"']*(?:$|\s*[.,;:!)\]\n—–]|\s+-\s|\s+(?:(?:response|answer|one)\s+)?is\s+"
    r"(?:better|best|preferred)\b)",
    re.IGNORECASE,
)
_LABEL = re.compile(r"\b(BothBad|Both[\s_-]Bad)\b")
_CANON = {"first": "First", "second": "Second", "tie": "Tie"}


class PolicyReply(NamedTuple):
    verdict: str | None
    explanation: str
    reason: str | None


class JudgeReply(NamedTuple):
    choice: str | None
    elaboration: str
    reason: str | None


def _show(text: str, limit: int = 40) -> str:
    one = " ".join(text.split())
    return repr(one if len(one) <= limit else one[: limit - 1] + "…")


def parse_policy(reply: str | None) -> PolicyReply:
    """The verdict and explanation of one policy reply, or None and why."""
    text = (reply or "").lstrip(_LEAD)
    m = _WORD.match(text)
    if not m:
        return PolicyReply(None, "", "The reply is empty or does not start with a word.")
    word = m.group(0).lower()
    rest = text[m.end() :].lstrip(_LEAD + ".,;!").strip()
    if word not in VERDICTS:
        return PolicyReply(
            None,
            text.strip(),
            f"The reply starts with {_show(m.group(0))}, not the one-word answer 'real' or 'fake'.",
        )
    return PolicyReply(word, rest, None)


def _verdict(text: str) -> tuple[str, re.Match[str]] | None:
    """The canonical choice ``text`` opens with as a verdict (see the module docstring)."""
    m = _CHOICE.match(text)
    if not m or not _STANDS_ALONE.match(text, m.end()):
        return None
    return _CANON.get(m.group(1).lower(), "BothBad"), m


def parse_judge(reply: str | None) -> JudgeReply:
    """The 4-way choice and elaboration of one judge reply, or None and why."""
    text = (reply or "").lstrip(_LEAD)
    found = _verdict(text)
    if found is None:
        m = _CHOICE.match(text)
        if m:
            opening = " ".join(text[: m.end() + 20].split()[:2])
            why = (
                f"The reply starts with {_show(opening)}, a heading or phrase, not a verdict "
                "word standing alone (First, Second, Tie or BothBad)."
            )
        else:
            why = f"The reply starts with {_show(text)}, not First, Second, Tie or BothBad."
        return JudgeReply(None, text.strip(), why)
    choice, m = found
    rest = text[m.end() :]
    others = {c for line in rest.splitlines() if (v := _verdict(line.lstrip(_LEAD)))
              for c in [v[0]]}  # fmt: skip
    others |= {"BothBad" for _ in _LABEL.finditer(rest)}
    others.discard(choice)
    if others:
        listed = ", ".join(sorted({choice, *others}))
        return JudgeReply(
            None,
            text.strip(),
            f"The reply gives more than one verdict ({listed}), so its choice is ambiguous.",
        )
    return JudgeReply(choice, rest.lstrip(_LEAD + ".,;!").strip(), None)
