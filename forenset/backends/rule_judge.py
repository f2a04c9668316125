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


KEEP_SCORE, BORDERLINE_SCORE = 0.6, 0.35  # the rule judge's own opinion; verdicts re-threshold


def judge(
    instruction: dict[str, Any],
    differences: list[dict[str, Any]],
    *,
    offtarget_dominance: float,
    max_offtarget_frac: float,
    grounding: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Score how well the listed differences match the instructed change.

    Differences the grounding check marked hallucinated are ignored; large pixel changes the
    extractor missed count as unlisted evidence (off-target when outside the target).
    """
    g = grounding or {}
    halluc = set(g.get("hallucinated", []))
    evidence = [d for d in differences if d.get("id") not in halluc]
    evidence += [
        {
            "id": f"missed{i}",
            "change_type": "unlisted change",
            "bbox": m["bbox"],
            "area": m["area"],
            "salience": 2,
        }
        for i, m in enumerate(g.get("missed", []))
    ]
    target = expand(list(instruction["change_bbox"]), 0.06)
    exp_area = _area(list(instruction["change_bbox"]))
    inside = outside = 0.0
    faint_inside = True
    artifacts = [d for d in evidence if d.get("change_type") == "artifact"]
    for d in evidence:
        if d.get("change_type") == "artifact":
            continue
        box, a = d["bbox"], float(d.get("area", _area(d["bbox"])))
        share = _inter(box, target) / max(1e-9, _area(box))
        inside += a * share
        outside += a * (1 - share)
        if share > 0.5 and int(d.get("salience", 1)) > 1:
            faint_inside = False
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
    elif faint_inside and final < KEEP_SCORE:
        verdict, cat = "BORDERLINE", "ambiguous"
        why = "only faint (salience 1) changes at the target: the edit cannot be verified"
    elif final >= KEEP_SCORE:
        verdict, cat = "KEEP", "none"
        why = f"the change at the target covers {match * 100:.0f}% of what the edit needs, with little elsewhere"
    elif final >= BORDERLINE_SCORE:
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


VERDICT_ORDER = ("KEEP", "BORDERLINE", "DISCARD")  # strictest last: ties go that way


def aggregate(
    records: list[dict[str, Any]],
    *,
    combine: str,
    keep_score: float,
    borderline_score: float,
    hard_discard: list[str],
    decide: str = "judge",
) -> dict[str, Any]:
    """Many judges' raw records -> one verdict. Pure function of the records and the rule.

    ``decide="judge"`` (the paper's Edit-Check): the judge's own KEEP / BORDERLINE / DISCARD is
    the verdict; several judges vote, a tie goes to the stricter verdict. ``decide="score"``:
    the judges' final scores are combined (``combine``) and re-thresholded. Either way a judge
    naming a ``hard_discard`` category (off-target dominates) discards.
    """
    scores = [float(r["final_score"]) for r in records]
    score = {"mean": sum(scores) / len(scores), "min": min(scores), "max": max(scores)}[combine]
    cats = [r["failure_category"] for r in records]
    hard = [c for c in cats if c in hard_discard]
    if hard:
        cat = max(set(hard), key=hard.count)
        return {
            "score": score,
            "verdict": "DISCARD",
            "failure_category": cat,
            "rationale": next(r["rationale"] for r in records if r["failure_category"] == cat),
        }
    if decide == "judge":
        votes = [r.get("verdict") for r in records if r.get("verdict") in VERDICT_ORDER]
        if votes:
            top = max(votes.count(v) for v in VERDICT_ORDER)
            verdict = max(
                (v for v in VERDICT_ORDER if votes.count(v) == top), key=VERDICT_ORDER.index
            )
            agree = [r for r in records if r.get("verdict") == verdict]
            bad = [r["failure_category"] for r in agree if r["failure_category"] != "none"]
            cat = (
                "none"
                if verdict == "KEEP"
                else (max(set(bad), key=bad.count) if bad else "edit_partial")
            )
            best = next((r for r in agree if r["failure_category"] == cat), agree[0])
            return {
                "score": score,
                "verdict": verdict,
                "failure_category": cat,
                "rationale": best["rationale"],
            }
    if all(c == "edit_missing" for c in cats):
        return {
            "score": score,
            "verdict": "DISCARD",
            "failure_category": "edit_missing",
            "rationale": records[0]["rationale"],
        }
    if score >= keep_score:
        verdict = "KEEP"
    elif score >= borderline_score or any(c == "ambiguous" for c in cats):
        verdict = "BORDERLINE"
    else:
        verdict = "DISCARD"
    bad = [c for c in cats if c != "none"]
    cat = "none" if verdict == "KEEP" else (max(set(bad), key=bad.count) if bad else "edit_partial")
    best = min(records, key=lambda r: abs(float(r["final_score"]) - score))
    return {
        "score": score,
        "verdict": verdict,
        "failure_category": cat,
        "rationale": best["rationale"],
    }
