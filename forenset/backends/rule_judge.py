"""The offline alignment judges and the verdict aggregation.

``judge_measured`` (rules-v8, the judgments stage's): decides from ``edit_strength``'s pixel
measurements — how much of the target reached the change its edit kind needs, the requested
change outside it, image-wide artefacts — and names the failure with the deciding numbers.
``judge`` (rules-v1): the instruction's target box vs the listed difference regions' area,
text-only; kept for callers without pixels.
"""

from __future__ import annotations

from typing import Any

from forenset.backends.edit_strength import StrengthRules

# v2: strength-aware coverage and measured failure categories; v3: the kind's aggregate
# change over the target's capable pixels, and "no visible change possible"; v4: missing vs
# partial against the image's background, off-target only for a located change; v5: a located
# smooth change makes a "missing" partial; v6: a weak-change DISCARD that a re-encode of the
# source explains is missing; v7: a texture change whose touched part changed as far as it
# allowed (``relative_share``, with ``extent``) is complete, and a blur that removed the
# gradient energy along one direction (``directional_change``: a motion blur)
# rules-v8: rules-v7's rule with the defaults chosen on all three bench editors (edit_strength)
RULE_VERSION = "rules-v8"
# the categories of a weak-change DISCARD that the codec test (rules-v6) may read as missing
CODEC_CATEGORIES = ("edit_partial", "off_target")
# what ``kind_change`` measures per change class (for the rationale)
KIND_MEASURE = {
    "blur": "high-frequency energy removed",
    "texture": "structure replaced",
    "colour": "mean hue/chroma shift",
    "luminance": "mean lightness change",
    "any": "mean change",
}
AREA_RULE_VERSION = "rules-v1"  # ``judge``: the listed differences' area, no pixels


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
    """Score how well the listed differences match the instructed change, from their area
    alone (rules-v1; the stages use ``judge_measured``, which weighs strength per edit kind).

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
    return _record(match, penalty, final, verdict, cat, why, AREA_RULE_VERSION)


def judge_measured(
    instruction: dict[str, Any],
    m: dict[str, Any],
    rules: StrengthRules,
    *,
    offtarget_dominance: float,
) -> dict[str, Any]:
    """The strength-aware rule judge: a verdict and failure category from ``edit_strength``'s
    measurements, the rationale quoting the numbers that decided it.

    Order: image-wide artefacts; the requested change outside the target, in one located
    piece, dominating what reached it (off-target); an unverifiable target (a blur of a flat
    area); nothing meaningful at the target (missing, or off-target when a located change of a
    quarter of the target's size or more sits elsewhere) unless the target shows clearly more
    faint change than the image's background (then a weak partial edit); then coverage against
    the kind's ``need`` (KEEP, BORDERLINE partial, DISCARD partial — or missing when the target
    changed no more than the background). rules-v5: a missing DISCARD whose smooth change
    stands ``located_partial`` times above its surroundings (``located_ratio``) is partial.
    rules-v6: a partial or off-target DISCARD of a re-encoded candidate whose difference a
    re-encode of the source explains (``codec_weak`` < ``codec_missing``, no faint change above
    the background, nothing located left outside) is missing; with ``codec_noise`` the noise
    limit applies to the noise that re-encode leaves (``codec_noise``). rules-v7: a texture
    change is also complete when ``extent`` of the target was touched and ``relative`` of the
    touched part changed as far as it allowed (``relative_share``: a removal of a low-contrast
    area takes all its structure with a small absolute change), and a blur when
    ``directional`` of the gradient energy along its most-blurred direction is gone
    (``directional_change``: a motion blur keeps what runs along its line)."""
    ch = m["change"]
    r = rules.changes[ch]
    box = max(1e-6, float(m["box_area"]))
    cov, weak = float(m["coverage"]), float(m["weak_coverage"])
    kc = float(m.get("kind_change", 0.0))
    reached = cov * box  # image fraction of the target that reached the change
    out = float(m["outside_frac"])
    match = min(1.0, cov / r.need)
    penalty = min(1.0, out / box)
    final = max(0.0, match - 0.5 * penalty)
    art = {k: float(m[k]) for k, lim in rules.artefacts.items() if float(m[k]) > lim}
    if "noise_residual" in art and codec_explains_noise(m, rules):
        del art["noise_residual"]  # a re-encode's quantisation noise, not added noise
    # the change elsewhere must be located (one piece of a fifth-ish of the target's size), not
    # a re-encode's speckle; measurements from before rules-v4 lack the pieces: located
    piece = rules.offtarget_located * box
    located = float(m.get("outside_piece", out)) >= piece
    any_located = float(m.get("outside_any_piece", m.get("outside_any", 0.0))) >= piece
    # the target's faint change above the image's background (None: not measured)
    faint = m.get("faint_excess")
    faint_partial = (
        faint is not None and rules.partial_above is not None and faint >= rules.partial_above
    )
    need = f"{ch} change (coverage {cov:.2f} of the target, need {r.need:.2f})"
    if art:
        verdict, cat = "DISCARD", "severe_artifacts"
        why = "image-wide degradation: " + ", ".join(
            f"{k} {v:.2f} > {rules.artefacts[k]:.2f}" for k, v in art.items()
        )
    elif (
        out >= rules.offtarget_min
        and out > offtarget_dominance * reached
        and located
        and not (rules.reached_not_offtarget and cov >= r.need)
    ):
        verdict, cat = "DISCARD", "off_target"
        why = (
            f"the requested {ch} change covers {out * 100:.1f}% of the image outside the target "
            f"vs {reached * 100:.1f}% inside (coverage {cov:.2f}): off-target"
        )
    elif not m.get("verifiable", True):
        verdict, cat = "BORDERLINE", "ambiguous"
        why = (
            f"no visible change possible: only {float(m.get('capable_share', 0.0)):.2f} of the "
            f"target can show a {ch} change (too flat, too light or too dark)"
        )
    elif weak < rules.missing_below and not faint_partial:
        if float(m.get("outside_any", 0.0)) >= max(rules.offtarget_min, 0.25 * box) and any_located:
            verdict, cat = "DISCARD", "off_target"
            why = (
                f"nothing reached the target (touched {weak:.2f} < {rules.missing_below:.2f}) "
                f"but {float(m['outside_any']) * 100:.1f}% of the image changed elsewhere"
            )
        else:
            verdict, cat = "DISCARD", "edit_missing"
            why = (
                f"no meaningful {ch} change anywhere: {weak:.2f} of the target touched "
                f"(< {rules.missing_below:.2f}), {out * 100:.2f}% of the image outside"
            )
    elif cov >= r.need:
        verdict, cat = "KEEP", "none"
        why = f"the target reached the {need}, {out * 100:.2f}% of the image changed outside"
    elif r.full is not None and kc >= r.full:
        verdict, cat = "KEEP", "none"
        why = (
            f"the target's {ch} change as a whole is complete ({KIND_MEASURE[ch]} {kc:.2f}, "
            f"need {r.full:.2f}), {out * 100:.2f}% of the image changed outside"
        )
    elif (
        r.directional is not None
        and m.get("directional_change") is not None
        and float(m["directional_change"]) >= r.directional
    ):
        verdict, cat = "KEEP", "none"
        why = (
            f"the target's {ch} change as a whole is complete along one direction (gradient "
            f"energy removed {float(m['directional_change']):.2f}, need {r.directional:.2f}), "
            f"{out * 100:.2f}% of the image changed outside"
        )
    elif r.extent is not None and weak >= r.extent and cov >= r.share * weak:
        verdict, cat = "KEEP", "none"
        why = (
            f"{weak:.2f} of the target visibly changed (need {r.extent:.2f}) and "
            f"{cov / max(weak, 1e-6):.2f} of that reached the full {ch} change "
            f"(need {r.share:.2f}), {out * 100:.2f}% of the image changed outside"
        )
    elif (
        r.relative is not None
        and r.extent is not None
        and weak >= r.extent
        and m.get("relative_share") is not None
        and float(m["relative_share"]) >= r.relative
    ):
        verdict, cat = "KEEP", "none"
        why = (
            f"{weak:.2f} of the target visibly changed (need {r.extent:.2f}) and "
            f"{float(m['relative_share']):.2f} of that changed as far as it allowed: structure "
            f"replaced (need {r.relative:.2f}), {out * 100:.2f}% of the image changed outside"
        )
    elif cov >= r.need * r.borderline or (r.full is not None and kc >= r.full * r.borderline):
        verdict, cat = "BORDERLINE", "edit_partial"
        why = f"the target nearly reached the {need}; {KIND_MEASURE[ch]} {kc:.2f}"
    elif faint is not None and rules.missing_excess is not None and faint < rules.missing_excess:
        verdict, cat = "DISCARD", "edit_missing"
        why = (
            f"no {ch} change beyond the image's own: the target shows {faint:+.2f} more "
            f"faint change than areas elsewhere (need {rules.missing_excess:.2f}); {need}"
        )
    else:
        verdict, cat = "DISCARD", "edit_partial"
        why = f"too weak or too small: {need}; {weak:.2f} of it touched"
        if r.full is not None:
            why += f", {KIND_MEASURE[ch]} {kc:.2f} (need {r.full:.2f})"
        if faint_partial and weak < rules.missing_below:
            why += f"; a faint change over the target ({faint:+.2f} above the background)"
    smooth = m.get("located_ratio")
    if (
        verdict == "DISCARD"
        and cat == "edit_missing"
        and rules.located_partial is not None
        and smooth is not None
        and float(smooth) >= rules.located_partial
    ):
        # a blend's edge inside the box, not a re-encode's uniform change: a partial edit
        cat = "edit_partial"
        why += (
            f"; but the target's smooth change stands {float(smooth):.1f}x above its "
            f"surroundings (need {rules.located_partial:.1f}): a weak or small partial edit"
        )
    if verdict == "DISCARD" and codec_says_missing(m, cat, rules):
        cat = "edit_missing"
        why += (
            f"; but a re-encode of the source ({m['codec']}) explains the change: "
            f"{float(m['codec_weak']):.2f} of the target touched beyond it "
            f"(< {rules.codec_missing:.2f}), nothing located elsewhere: missing"
        )
    return _record(match, penalty, final, verdict, cat, why, RULE_VERSION)


def wants_codec(m: dict[str, Any], rec: dict[str, Any], rules: StrengthRules) -> bool:
    """Whether the codec test (``edit_strength.codec_explained``) can change ``rec``: the
    codec not measured yet, and a weak-change DISCARD (``codec_missing`` on) or a noise
    artefact (``codec_noise`` on) — the cost of the re-encodes is paid for these rows only."""
    if "codec" in m or rec["verdict"] != "DISCARD":
        return False
    if rules.codec_missing is not None and rec["failure_category"] in CODEC_CATEGORIES:
        return True
    lim = rules.artefacts.get("noise_residual")
    return (
        rules.codec_noise
        and rec["failure_category"] == "severe_artifacts"
        and lim is not None
        and float(m.get("noise_residual", 0.0)) > lim
    )


def codec_explains_noise(m: dict[str, Any], rules: StrengthRules) -> bool:
    """rules-v6: the noise residual over the limit is a re-encode's (``codec_noise``, the
    residual left once the best re-encode of the source is taken out, is within it)."""
    lim = rules.artefacts.get("noise_residual")
    return (
        rules.codec_noise
        and lim is not None
        and m.get("codec") not in (None, "none")
        and m.get("codec_noise") is not None
        and float(m["codec_noise"]) <= lim
    )


def codec_says_missing(m: dict[str, Any], cat: str, rules: StrengthRules) -> bool:
    """rules-v6: a re-encode of the source (not the source as it is) explains the difference —
    the target is touched beyond it on under ``codec_missing`` of its area, shows no faint
    change above the background (``partial_above``) and nothing located is left outside
    (under ``offtarget_min``, or ``offtarget_located`` of the target's area)."""
    if rules.codec_missing is None or cat not in CODEC_CATEGORIES:
        return False
    if m.get("codec") in (None, "none"):
        return False
    box = max(1e-6, float(m["box_area"]))
    faint = m.get("codec_faint")
    if faint is not None and rules.partial_above is not None and faint >= rules.partial_above:
        return False
    left = max(rules.offtarget_min, rules.offtarget_located * box)
    return float(m["codec_weak"]) < rules.codec_missing and float(m["codec_piece"]) < left


def _record(
    match: float, penalty: float, final: float, verdict: str, cat: str, why: str, version: str
) -> dict[str, Any]:
    """One judgment record, as both rules write it."""
    return {
        "match_score": round(match, 4),
        "offtarget_penalty": round(penalty, 4),
        "final_score": round(final, 4),
        "verdict": verdict,
        "failure_category": cat,
        "rationale": why,
        "rule_version": version,
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
