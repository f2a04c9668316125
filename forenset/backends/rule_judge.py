"""The offline alignment judge: instruction target box vs the listed difference regions.

Text-only by construction — it reads the instruction and the difference record, never pixels.
"""

from __future__ import annotations

from typing import Any

RULE_VERSION = "rules-v1"


def _inter(a: list[float], b: list[float]) -> float:
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def _area(b: list[float]) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def expand(b: list[float], margin: float) -> list[float]:
    return [
        max(0.0, b[0] - margin),
        max(0.0, b[1] - margin),
        min(1.0, b[2] + margin),
        min(1.0, b[3] + margin),
    ]


def judge(
    instruction: dict[str, Any],
    differences: list[dict[str, Any]],
    *,
    keep_score: float,
    borderline_score: float,
    offtarget_dominance: float,
    max_offtarget_frac: float,
) -> dict[str, Any]:
    target = expand(list(instruction["change_bbox"]), 0.06)
    exp_area = _area(list(instruction["change_bbox"]))
    inside = outside = 0.0
    artifacts = [d for d in differences if d.get("change_type") == "artifact"]
    for d in differences:
        if d.get("change_type") == "artifact":
            continue
        box, a = d["bbox"], float(d.get("area", _area(d["bbox"])))
        share = _inter(box, target) / max(1e-9, _area(box))
        inside += a * share
        outside += a * (1 - share)
    # an ellipse inside the box covers ~pi/4 of it; ask for half of that to count as complete
    match = min(1.0, inside / max(1e-6, 0.4 * exp_area))
    penalty = min(1.0, outside / max(1e-6, max_offtarget_frac * 2))
    final = max(0.0, match - 0.5 * penalty)
    worst_art = max((d["salience"] for d in artifacts), default=0)
    if worst_art >= 3:
        verdict, cat = "DISCARD", "severe_artifacts"
        why = f"widespread artefacts (salience {worst_art}) dominate the candidate"
    elif outside > max_offtarget_frac and outside > offtarget_dominance * inside:
        verdict, cat = "DISCARD", "off_target"
        why = (
            f"off-target changes cover {outside * 100:.1f}% of the image vs {inside * 100:.1f}% "
            "at the target: hard discard regardless of partial compliance"
        )
    elif inside <= 1e-6:
        verdict, cat = "DISCARD", "edit_missing"
        why = "no difference was found at the instructed location"
    elif final >= keep_score:
        verdict, cat = "KEEP", "none"
        why = f"the change at the target covers {match * 100:.0f}% of what the edit needs, with little elsewhere"
    elif final >= borderline_score:
        verdict, cat = "BORDERLINE", "edit_partial"
        why = f"the change at the target is partial (score {final:.2f})"
    else:
        verdict, cat = "DISCARD", "edit_partial"
        why = f"the change at the target is too weak (score {final:.2f})"
    return {
        "match_score": round(match, 4),
        "offtarget_penalty": round(penalty, 4),
        "final_score": round(final, 4),
        "verdict": verdict,
        "failure_category": cat,
        "rationale": why,
        "rule_version": RULE_VERSION,
    }
