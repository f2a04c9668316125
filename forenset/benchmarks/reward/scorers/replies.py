"""Parsers of the reward benchmark's two reply formats (XAIGID-RewardBench §3.2, §3.4).

* A policy reply starts with a one-word verdict ('real' or 'fake'), then the explanation:
  ``r = (y, e)``. Leading markdown (``**``), quotes, whitespace and a trailing punctuation mark
  around that first word are tolerated; any other first word leaves ``y`` unparsed (a wrong
  detection downstream), with the reason in one sentence.
* A judge reply starts with one of First / Second / Tie / BothBad ("Both Bad", "Both bad" and
  "Both-bad" read as BothBad), then the elaboration.
"""

from __future__ import annotations

import re
from typing import NamedTuple

VERDICTS = ("real", "fake")
_LEAD = " \t\r\n\"'`*_#>-:"
_WORD = re.compile(r"[A-Za-z]+")
_CHOICE = re.compile(r"^(first|second|tie|both[\s_-]*bad)\b", re.IGNORECASE)
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


def parse_judge(reply: str | None) -> JudgeReply:
    """The 4-way choice and elaboration of one judge reply, or None and why."""
    text = (reply or "").lstrip(_LEAD)
    m = _CHOICE.match(text)
    if not m:
        return JudgeReply(
            None,
            text.strip(),
            f"The reply starts with {_show(text)}, not First, Second, Tie or BothBad.",
        )
    word = m.group(1).lower()
    choice = _CANON.get(word, "BothBad")
    return JudgeReply(choice, text[m.end() :].lstrip(_LEAD + ".,;!").strip(), None)
