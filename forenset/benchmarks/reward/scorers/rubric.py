"""The offline rule judge and the simulated annotators of the reward benchmark.

Both read the App. A rubric where plain text allows it. ``rubric_score`` rates one response in
[0, 1] from measurable traits of its text:

* verdict (Logic): no one-word verdict scores 0 — there is no argument to weigh;
* details (Details): the explanation names *where* (left, top, corner, region…) and gives a
  measurement (a number), +0.15 each;
* relevance (Relevance/Insight): forensic vocabulary (noise, compression, lighting, shadow,
  texture, edges, artifacts…), +0.06 per distinct term, at most +0.3;
* weighing (Weighing): 15-200 words +0.15; under 8 words -0.2 (shallow);
* contradiction (Contradiction): the text concludes the opposite of its own verdict, -0.4;
* hedging (Insight): "maybe", "probably", "might"… -0.05 each, at most -0.15.

``RuleJudge.judge`` compares two scores: both under ``bad_below`` -> BothBad, within
``tie_margin`` -> Tie, else the higher one. It never sees the image's true label, so it can be
wrong where a convincing explanation defends the wrong verdict — as the paper's judges are.

``simulate_annotator`` is the documented *noisy rule* of the offline demo's annotators: they
know the true label (as the paper's annotators judge from the image), so a response's quality is
0.6 for a correct verdict plus 0.4 x its rubric score; both under 0.45 -> BothBad, within 0.1 ->
Tie, else the better one; with probability ``noise`` an annotator picks one of the four choices
uniformly instead; its lead time is log-normal around 40 s, and with probability ``rush`` it is a
3-10 s click (which the min-lead-time filter drops). Every row they produce says ``simulated``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from forenset.benchmarks.reward.scorers.metrics import CHOICES
from forenset.benchmarks.reward.scorers.replies import parse_policy

RULE_MODEL = "rubric-rules-v1"
SIM_MODEL = "noisy-rubric-v1"

_WHERE = re.compile(
    r"\b(left|right|top|bottom|upper|lower|centre|center|corner|middle|edge of|region|"
    r"background|foreground)\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\d")
_TERMS = (
    "noise", "compression", "jpeg", "lighting", "shadow", "texture", "edge", "artifact",
    "artefact", "blur", "sharp", "reflection", "perspective", "anatomy", "hands", "text",
    "symmetry", "smooth", "grain", "inconsisten", "distort", "colour", "color",
)  # fmt: skip
_HEDGE = re.compile(r"\b(maybe|probably|might|perhaps|possibly|seems)\b", re.IGNORECASE)
_CONCLUDE = re.compile(
    r"\b(?:is|judged|appears|looks|therefore|so)\s+(?:an?\s+)?(real|fake|authentic|genuine|"
    r"ai-generated|generated|manipulated)\b",
    re.IGNORECASE,
)
_SIDE = {"real": "real", "authentic": "real", "genuine": "real"}


def conclusions(text: str) -> set[str]:
    """The verdicts an explanation's own sentences state ("… is real", "judged manipulated")."""
    return {_SIDE.get(m.lower(), "fake") for m in _CONCLUDE.findall(text)}


def rubric_score(reply: str | None) -> float:
    """The rule judge's rating of one policy reply, in [0, 1] (module docstring)."""
    parsed = parse_policy(reply)
    if parsed.verdict is None:
        return 0.0
    e = parsed.explanation
    words = len(e.split())
    low = e.lower()
    s = 0.3
    s += 0.15 * bool(_WHERE.search(e)) + 0.15 * bool(_NUMBER.search(e))
    s += min(0.3, 0.06 * sum(t in low for t in _TERMS))
    s += 0.15 if 15 <= words <= 200 else (-0.2 if words < 8 else 0.0)
    if conclusions(e) - {parsed.verdict}:
        s -= 0.4
    s -= min(0.15, 0.05 * len(_HEDGE.findall(e)))
    return float(min(1.0, max(0.0, s)))


def compare(a: float, b: float, bad_below: float, tie_margin: float) -> str:
    if a < bad_below and b < bad_below:
        return "BothBad"
    if abs(a - b) < tie_margin:
        return "Tie"
    return "First" if a > b else "Second"


@dataclass(frozen=True)
class RuleJudge:
    """Rubric scores of both responses compared (module docstring)."""

    bad_below: float = 0.45
    tie_margin: float = 0.08

    def judge(self, first: str | None, second: str | None) -> tuple[str, str]:
        """(choice, elaboration naming both scores)."""
        a, b = rubric_score(first), rubric_score(second)
        choice = compare(a, b, self.bad_below, self.tie_margin)
        why = {
            "BothBad": "neither response makes a grounded, consistent argument",
            "Tie": "both responses argue about equally well",
            "First": "the first response is more specific, relevant and consistent",
            "Second": "the second response is more specific, relevant and consistent",
        }[choice]
        return choice, f"{choice}: {why} (rubric scores {a:.2f} vs {b:.2f})."


def quality(reply: str | None, truth: str) -> float:
    """A simulated annotator's view of one response: 0.6 x correct verdict + 0.4 x rubric."""
    return 0.6 * (parse_policy(reply).verdict == truth) + 0.4 * rubric_score(reply)


def simulate_annotator(
    first: str | None, second: str | None, truth: str, rng: np.random.Generator,
    noise: float, rush: float,
) -> tuple[str, float]:  # fmt: skip
    """(choice, lead time in seconds) of one simulated annotator (module docstring)."""
    choice = compare(quality(first, truth), quality(second, truth), 0.45, 0.1)
    if rng.random() < noise:
        choice = CHOICES[int(rng.integers(len(CHOICES)))]
    lead = (
        float(rng.uniform(3, 10)) if rng.random() < rush else float(rng.lognormal(np.log(40), 0.5))
    )
    return choice, round(lead, 2)
