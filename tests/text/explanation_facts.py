"""Checks an offline explanation sentence by sentence against its row's measurements.

``unsupported(kind, text, row, image)`` lists what a sentence states that the row does not
measure: a place, colour or change type not in the difference record (or in the target the
instruction names), a percentage or salience that no difference has, an image statistic that
the pixels do not give, a sentence that states no measured fact at all, a place stated twice.
Used by the template tests (synthetic records) and the example-build test (real rows).
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from forenset.backends.offline_explain import (
    MEASURED,
    PLAIN,
    generated_evidence,
    image_evidence,
    positions,
)
from forenset.backends.offline_vision import COLOURS
from forenset.text.checks import repeated_ngrams

COLOUR = re.compile(r"\b(" + "|".join(COLOURS) + r")\b(?! levels?)")
CHANGE = re.compile(r"\b(colour|brightness|content) change\b")
NUMBER = re.compile(r"(\d+(?:\.\d+)?)%?")


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def _pct(v: Any, fmt: str) -> str:
    return f"{float(v) * 100:{fmt}}"


def fake_problems(kind: str, text: str, row: dict[str, Any]) -> list[str]:
    ins = json.loads(row.get("instruction") or "{}")
    diffs = json.loads(row["differences"] or "[]")
    main = [d for d in diffs if d.get("change_type") != "artifact"]
    art = [d for d in diffs if d.get("change_type") == "artifact"]
    target = re.sub(r"^(the|a|an)\s+", "", str(ins.get("target") or "").strip().lower())
    places = {str(d["region"]) for d in main if d.get("region")} | set(positions(target))
    colours = set(COLOUR.findall(target))
    types = {str(d.get("change_type")) for d in main}
    areas = {_pct(d.get("area") or 0, ".1f") for d in main}
    mags = {_pct(d["magnitude"], ".0f") for d in main if d.get("magnitude") is not None}
    sal = {str(d.get("salience", 1)) for d in main}
    art_mag = {_pct(d["magnitude"], ".1f") for d in art if d.get("magnitude") is not None}
    out = []
    for s in sentences(text):
        low = s.lower()
        facts = 0
        found = positions(low)
        for p in found:
            if p not in places:
                out.append(f"{s!r}: place {p!r} is not measured")
        if len(found) != len(set(found)):
            out.append(f"{s!r}: states a place twice")
        facts += len(found)
        for c in COLOUR.findall(low):
            if c not in colours:
                out.append(f"{s!r}: colour {c!r} is not measured")
        for t in CHANGE.findall(low):
            if f"{t} change" not in types:
                out.append(f"{s!r}: a {t} change is not measured")
            facts += 1
        for t, said in [*MEASURED.items(), *PLAIN.items()]:
            if said.lower() in low:
                if t not in types:
                    out.append(f"{s!r}: states a {t} that is not measured")
                facts += 1
        for pattern, allowed in (
            (r"covers about ([\d.]+)% of the frame", areas),
            (r"spans an area of ([\d.]+)%", areas),
            (r"about ([\d.]+)% of the picture", areas),
            (r"mean intensity change of (\d+)%", mags),
            (r"(\d+)% on average", mags),
            (r"salience (\d)", sal),
            (r"blocking of about ([\d.]+)% per pixel", art_mag),
        ):
            for v in re.findall(pattern, low):
                if v not in allowed:
                    out.append(f"{s!r}: {v} is not a measured value ({sorted(allowed)})")
                facts += 1
        if "noise or blocking" in low and not art:
            out.append(f"{s!r}: no artefact was measured")
        if target and target in low:
            facts += 1
        if "no measurable pixel difference" in low and not main and not art:
            facts += 1
        claims = ("differs from an unedited photo", "carries the measured changes", "was edited")
        if main and any(c in low for c in claims):
            facts += 1  # the verdict, with a measured difference behind it
        if not facts:
            out.append(f"{s!r}: states no measured fact of this sample")
    return out


def real_problems(text: str, row: dict[str, Any], img: np.ndarray) -> list[str]:
    """An authenticity text: its light, noise and sharpness figures are image_evidence's."""
    ev = image_evidence(img)
    names = [e["name"].lower() for e in json.loads(row.get("entities") or "[]")]
    need = {
        "light": {
            "evenly, without a dominant direction": "evenly lit",
            "from above": "brighter in its upper half",
            "from below": "brighter in its lower half",
            "from the left": "brighter on its left",
            "from the right": "brighter on its right",
        }[ev["light"]],
        "noise": f"about {ev['noise_sigma']:.1f} grey levels",
        "sharpness": f"from {ev['detail_min']:.0f} to {ev['detail_max']:.0f}",
    }
    out = []
    for s in sentences(text):
        low = s.lower()
        hits = [k for k, v in need.items() if v in low]
        if not hits:
            out.append(f"{s!r}: states none of the measured statistics {sorted(need.values())}")
        named = " ".join(names)
        for p in positions(low):
            if p not in named:
                out.append(f"{s!r}: place {p!r} is in no entity of the photo")
        for c in COLOUR.findall(low):
            if c not in named:
                out.append(f"{s!r}: colour {c!r} is in no entity of the photo")
    return out


def generated_problems(text: str, img: np.ndarray) -> list[str]:
    """A text-to-image text: each sentence but the opening states generated_evidence figures."""
    ev = generated_evidence(img)
    figures = [
        f"{ev['noise_min']:.1f} to {ev['noise_max']:.1f} grey levels",
        f"from {ev['detail_min']:.0f} to {ev['detail_max']:.0f}",
        f"averages {ev['saturation'] * 100:.0f}%",
        "times its median",
        "grain",
        "repeating grid",
    ]
    return [
        f"{s!r}: states no measured statistic"
        for s in sentences(text)[1:]
        if not any(f in s.lower() for f in figures)
    ]


def unsupported(kind: str, text: str, row: dict[str, Any], img: np.ndarray | None) -> list[str]:
    """Everything in ``text`` its row does not measure, and any repeated 4-word phrase."""
    out = [f"repeats {g!r}" for g in repeated_ngrams(text)]
    if kind == "authenticity":
        assert img is not None
        return out + real_problems(text, row, img)
    if row.get("differences") is None:
        assert img is not None
        return out + generated_problems(text, img)
    return out + fake_problems(kind, text, row)


def build_defects(store: Any) -> list[str]:
    """Every ok explanation of a built run checked against its splits row (and its pixels)."""
    from forenset.images import decode_rgb
    from tests.helpers import rows

    by_sample = {r["sample_id"]: r for r in rows(store, "splits") if r["status"] == "ok"}
    out = []
    ok = [e for e in rows(store, "explanations") if e["status"] == "ok"]
    if not ok:
        return ["the build has no ok explanation to check"]
    for e in ok:
        row = by_sample[e["sample_id"]]
        img = None
        if e["kind"] == "authenticity" or row.get("differences") is None:
            img = decode_rgb(store.get_blob(row["blob"]))
        out += [f"{e['explanation_id']}: {p}" for p in unsupported(e["kind"], e["text"], row, img)]
    return out
