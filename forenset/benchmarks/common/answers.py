"""Parse a detector's reply in the paper's format (XPlainVerse, App. 16)::

    <reasoning>your reasoning here</reasoning>
    <answer>real or fake</answer>

The label inside ``<answer>`` is scored for detection and the text inside ``<reasoning>`` for
explanation. An unparseable reply counts as a *wrong* prediction downstream, so the parser is
strict where guessing would change a score, tolerant where it would not, and always says why
it refused in one sentence a reader of the report can act on.

Decisions (tested in ``tests/detectors/test_detector_answers.py``):

* tag names are case-insensitive and may carry spaces inside the brackets (``< Answer >``,
  ``</ANSWER >``); the reply may be wrapped in code fences or other prose;
* the answer is case-insensitive and may carry surrounding whitespace, quotes, asterisks
  (markdown bold) or trailing punctuation: ``Fake``, ``FAKE.``, ``**fake**``, ``"real"!`` parse;
* anything else inside the tag is unparseable, even when it contains a label: ``The image is
  fake``, ``fake image``, ``real or fake`` (the template echoed), ``AI-generated``, ``not real``;
* a label outside ``<answer>…</answer>`` is not accepted (``Answer: fake`` is unparseable);
* two or more ``<answer>`` tags are unparseable, even when they agree;
* an ``<answer>`` tag without its closing tag is unparseable;
* a missing, unclosed or empty ``<reasoning>`` does not make the answer unparseable
  (detection is still scored) but is flagged: the reasoning is then ``""`` and ``reason``
  says so (explanation metrics would otherwise score an empty text with no note). Several
  ``<reasoning>`` tags are joined with a blank line.
"""

from __future__ import annotations

import re
from typing import NamedTuple

LABELS = ("real", "fake")

_OPEN = r"<\s*{tag}\s*>"
_CLOSE = r"<\s*/\s*{tag}\s*>"


def _tag(tag: str) -> re.Pattern[str]:
    return re.compile(
        _OPEN.format(tag=tag) + r"(.*?)" + _CLOSE.format(tag=tag), re.IGNORECASE | re.DOTALL
    )


_ANSWER = _tag("answer")
_REASONING = _tag("reasoning")
_ANSWER_OPEN = re.compile(_OPEN.format(tag="answer"), re.IGNORECASE)
_REASONING_OPEN = re.compile(_OPEN.format(tag="reasoning"), re.IGNORECASE)
_STRIP = " \t\r\n\"'`*_.!,;:"  # what may surround the label inside its tag


class ParsedAnswer(NamedTuple):
    """``answer`` is "real", "fake" or None; ``reason`` says why when it is None, or, with an
    answer, that the explanation is missing or empty."""

    answer: str | None
    reasoning: str
    reason: str | None


def _show(text: str, limit: int = 60) -> str:
    one = " ".join(text.split())
    return repr(one if len(one) <= limit else one[: limit - 1] + "…")


def parse_answer(reply: str | None) -> ParsedAnswer:
    """The label and reasoning of one reply, or None and the reason it cannot be scored."""
    if reply is None or not reply.strip():
        return ParsedAnswer(None, "", "The reply is empty, so it holds no real/fake answer.")
    reasoning = "\n\n".join(m.strip() for m in _REASONING.findall(reply))
    found = _ANSWER.findall(reply)
    if len(found) > 1:
        shown = ", ".join(_show(a, 20) for a in found)
        return ParsedAnswer(
            None,
            reasoning,
            f"The reply has {len(found)} <answer> tags ({shown}); exactly one is required.",
        )
    if not found:
        if _ANSWER_OPEN.search(reply):
            why = "The reply opens an <answer> tag but never closes it with </answer>."
        else:
            bare = re.search(r"\b(real|fake)\b", reply, re.IGNORECASE)
            why = "The reply has no <answer>…</answer> tag" + (
                f"; the word {bare.group(0)!r} outside the tags is not accepted as an answer."
                if bare
                else "."
            )
        return ParsedAnswer(None, reasoning, why)
    raw = found[0]
    label = raw.strip(_STRIP).lower()
    if label in LABELS:
        return ParsedAnswer(label, reasoning, None if reasoning else _no_explanation(reply, label))
    if not raw.strip():
        return ParsedAnswer(
            None, reasoning, "The <answer> tag is empty; it must hold real or fake."
        )
    return ParsedAnswer(
        None,
        reasoning,
        f"The <answer> tag holds {_show(raw)}, which is neither 'real' nor 'fake'.",
    )


def _no_explanation(reply: str, label: str) -> str:
    """Why a reply with a usable answer has no explanation to score."""
    if _REASONING.search(reply):
        why = "its <reasoning> tag is empty"
    elif _REASONING_OPEN.search(reply):
        why = "its <reasoning> tag is never closed with </reasoning>"
    else:
        why = "it has no <reasoning>…</reasoning> tag"
    return f"The reply answers {label!r} but gives no explanation: {why}."


def format_reply(reasoning: str, answer: str) -> str:
    """A reply in the paper's format, as a detector should give it (``parse_answer``'s inverse).

    Angle brackets in the reasoning are replaced so it can never open or close a tag."""
    if answer not in LABELS:
        raise ValueError(f"answer must be one of {LABELS}, got {answer!r}")
    text = " ".join(reasoning.split()).replace("<", "‹").replace(">", "›")
    return f"<reasoning>{text}</reasoning>\n<answer>{answer}</answer>"
