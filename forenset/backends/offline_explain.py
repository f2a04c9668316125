"""Template explanations built from measured evidence: the difference record for fakes,
image statistics for reals. Every sentence states something computed from the data."""

from __future__ import annotations

import json
import re
from typing import Any

import cv2
import numpy as np

from forenset.text.checks import repeated_ngrams

LEAK_PATTERNS = [
    r"\binstruction(s)?\b",
    r"\bcompared (to|with) the original\b",
    r"\bthe original (image|photo)\b",
    r"\breference image\b",
    r"\bdifference record\b",
    r"\bthe edit (says|asks)\b",
    r"\bprompt\b",
]

# What the pixel extractor measured for each change type it assigns (offline_diff): stated as
# measured, never inferred from the edit kind that made the candidate (that would leak it).
# Worded apart, so that two types in one text share no 4-word phrase.
MEASURED = {
    "colour change": "the colour shifts more than the brightness there, and the local structure is kept",
    "brightness change": "the brightness shifts there while edges and texture stay in place",
    "content change": "the local structure itself (edges and texture) is altered there",
}
PLAIN = {
    "colour change": "its colour was changed",
    "brightness change": "it was made lighter or darker",
    "content change": "its shape or texture was changed",
}


def leaks(text: str) -> list[str]:
    return [p for p in LEAK_PATTERNS if re.search(p, text, re.I)]


def mentioned(text: str, entities: list[str]) -> list[str]:
    low = text.lower()
    return [e for e in entities if e and e.lower() in low]


def where(region: str | None) -> str:
    """A measured region name as a phrase: 'in the upper left', 'across the whole image'."""
    if not region:
        return "in one part of the image"
    return "across the whole image" if region == "whole image" else f"in the {region}"


# The position names offline_vision.position_name and offline_diff give regions and entities.
POSITION = re.compile(r"\b(?:(?:upper|lower|middle) (?:left|right|centre)|centre|whole image)\b")


def positions(text: str) -> list[str]:
    """The position names a phrase states ("grey region at the upper left" -> upper left)."""
    return POSITION.findall(text.lower())


def article(noun: str) -> str:
    return "an" if noun[:1].lower() in "aeiou" else "a"


def subject(ins: dict[str, Any], main: list[dict[str, Any]]) -> tuple[str, str, str]:
    """(noun phrase, its location phrase, the entity an explanation must name): the
    instruction's target when it has one, else the largest measured region. A target that
    already names its place ("grey region at the upper left") gets no second location."""
    region = main[0].get("region") if main else None
    target = str(ins.get("target") or "").strip()
    if target:
        bare = re.sub(r"^(the|a|an)\s+", "", target, flags=re.I)
        return f"the {bare}", "" if positions(bare) else where(region), bare
    if region:
        return "the changed area", where(region), region
    return "the image", "", "image"


def artefact_level(diffs: list[dict[str, Any]]) -> float | None:
    """The first artefact difference's magnitude (None: no artefact measured)."""
    art = [d for d in diffs if d.get("change_type") == "artifact"]
    level = art[0].get("magnitude") if art else None
    return None if level is None else float(level)


def _sentence(*parts: str) -> str:
    text = " ".join(p for p in parts if p).strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def complex_fake(ins: dict[str, Any], diffs: list[dict[str, Any]], variant: int = 0) -> str:
    """The measured differences as evidence: change type, extent, place, strength, salience.

    Each place is stated once (a later difference in a place already named is "in the same
    part"), the second difference is worded apart from the first and each change type's
    meaning is stated once, so no phrase repeats. ``variant`` 0/1 words the opening apart;
    from 2 on, the second difference is left out (the fallback when numbers collide)."""
    main = [d for d in diffs if d.get("change_type") != "artifact"]
    noun, loc, _ = subject(ins, main)
    if not main:  # kept by the strength test, no located change in the difference record
        level = artefact_level(diffs)
        if level is not None:
            return _sentence(
                f"{noun} was edited: high-frequency noise or blocking of about "
                f"{float(level) * 100:.1f}% per pixel is spread across the image"
            )
        return _sentence(
            f"{noun} was edited, but no measurable pixel difference locates the change anywhere "
            "in the frame"
        )
    said = {where(p) for p in positions(noun)} | {loc}
    parts = []
    if variant % 2 == 0:
        parts.append(_sentence(noun, loc, "differs from an unedited photo"))
    else:
        parts.append(
            _sentence(f"look at {f'{noun} {loc}'.strip()}: it carries the measured changes")
        )
    meant: set[str] = set()
    for k, d in enumerate(main[: 1 if variant >= 2 else 2]):
        ct = str(d.get("change_type") or "change")
        reg = d.get("region")
        if where(reg) not in said:
            place = where(reg)
        elif k == 0:
            place = ""
        else:
            place = "in the same part" if reg else "in a second area"
        said.add(where(reg))
        area = f"{float(d.get('area') or 0) * 100:.1f}%"
        mag = d.get("magnitude")
        sal = d.get("salience", 1)
        if k == 0:
            strength = (
                f"with a mean intensity change of {float(mag) * 100:.0f}%"
                if mag is not None
                else ""
            )
            parts.append(
                _sentence(
                    f"{article(ct)} {ct} covers about {area} of the frame",
                    place,
                    strength,
                    f"(salience {sal} of 5)",
                )
            )
        else:
            avg = f", {float(mag) * 100:.0f}% on average" if mag is not None else ""
            lead = f"{place}, a further {ct}" if place else f"a further {ct}"
            # "spans an area of": never "<area> of the" twice when both areas round alike
            parts.append(_sentence(f"{lead} spans an area of {area}{avg}, salience {sal}"))
        if ct in MEASURED and ct not in meant:
            meant.add(ct)
            parts.append(_sentence(MEASURED[ct]))
    art = [d for d in diffs if d.get("change_type") == "artifact"]
    if art:
        level = art[0].get("magnitude")
        amount = f" of about {float(level) * 100:.1f}% per pixel" if level is not None else ""
        parts.append(
            _sentence(f"high-frequency noise or blocking{amount} is spread across the image")
        )
    return " ".join(parts)


def simple_fake(ins: dict[str, Any], diffs: list[dict[str, Any]], variant: int = 0) -> str:
    """One measured reason in plain words. A kept edit whose difference record lists no
    located change (the strength test kept it; the differencer found no region) says so rather
    than pointing at a place nothing was measured in."""
    main = [d for d in diffs if d.get("change_type") != "artifact"]
    noun, loc, _ = subject(ins, main)
    if not main:
        level = artefact_level(diffs)
        if level is not None:
            return _sentence(
                f"{noun} was edited; the only measured difference is high-frequency noise or "
                f"blocking of about {float(level) * 100:.1f}% per pixel, spread across the image"
            )
        return _sentence(
            f"{noun} was edited, but no measurable pixel difference shows where in the picture"
        )
    ct = str(main[0].get("change_type"))
    reason = PLAIN.get(ct, "it does not match the rest of the picture")
    if ct not in PLAIN:  # a type without plain words: its measured extent
        reason = f"about {float(main[0].get('area') or 0) * 100:.1f}% of the picture changed there"
    place = f"{noun} {loc}".strip()
    if variant % 2 == 0:
        return f"This picture was edited. Look at {place}: {reason}."
    return _sentence(f"{place} gives it away: {reason}, so the picture was edited")


def noise_sigma(grey: np.ndarray) -> float:
    """Immerkaer's fast noise estimate: a Laplacian-difference kernel that cancels image structure."""
    k = np.array([[1, -2, 1], [-2, 4, -2], [1, -2, 1]], dtype=np.float64)
    r = cv2.filter2D(grey, cv2.CV_64F, k)[1:-1, 1:-1]
    return float(np.sqrt(np.pi / 2) * np.abs(r).mean() / 6.0)


def image_evidence(img: np.ndarray) -> dict[str, Any]:
    grey = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY).astype(np.float64)
    sigma = noise_sigma(grey)
    h, w = grey.shape
    tiles = [
        grey[i * h // 3 : (i + 1) * h // 3, j * w // 3 : (j + 1) * w // 3]
        for i in range(3)
        for j in range(3)
    ]
    lap = [float(cv2.Laplacian(t, cv2.CV_64F).var()) for t in tiles]
    gy, gx = (
        float(grey[: h // 2].mean() - grey[h // 2 :].mean()),
        float(grey[:, : w // 2].mean() - grey[:, w // 2 :].mean()),
    )
    if abs(gy) < 6 and abs(gx) < 6:
        light = "evenly, without a dominant direction"
    elif abs(gy) >= abs(gx):
        light = "from above" if gy > 0 else "from below"
    else:
        light = "from the left" if gx > 0 else "from the right"
    return {"noise_sigma": sigma, "detail_min": min(lap), "detail_max": max(lap), "light": light}


def authenticity(img: np.ndarray, caption: str, entities: list[str], variant: int = 0) -> str:
    """Measured image statistics only: brightness gradient, noise level, local sharpness."""
    ev = image_evidence(img)
    ents: list[str] = []
    for e in entities:  # at most two, and a second only if it repeats no phrase of the first
        bare = re.sub(r"^(the|a|an)\s+", "", e, flags=re.I) if e else ""
        if bare and len(ents) < 2 and not repeated_ngrams(" and the ".join([*ents, bare])):
            ents.append(bare)
    scene = " and the ".join(ents)
    around = f"the scene around the {scene}" if ents else "the scene"
    light = {
        "evenly, without a dominant direction": "is evenly lit, with no brightness gradient between its halves",
        "from above": "is brighter in its upper half than in its lower half",
        "from below": "is brighter in its lower half than in its upper half",
        "from the left": "is brighter on its left than on its right",
        "from the right": "is brighter on its right than on its left",
    }[ev["light"]]
    noise = "a fine, even sensor grain" if ev["noise_sigma"] > 0.8 else "very low noise"
    parts = [
        _sentence(around, light),
        _sentence(
            f"the image has {noise} (about {ev['noise_sigma']:.1f} grey levels, estimated over "
            "the whole frame)"
        ),
        _sentence(
            f"local sharpness over a 3 by 3 grid ranges from {ev['detail_min']:.0f} to "
            f"{ev['detail_max']:.0f}"
        ),
    ]
    if variant % 2 == 1:
        parts = [parts[1], parts[0], parts[2]]
    return " ".join(parts)


def entity_names(entities_json: str | None, extra: list[str] | None = None) -> list[str]:
    names = [e["name"] for e in json.loads(entities_json or "[]") if e.get("name")]
    return list(dict.fromkeys((extra or []) + names))


def generated_evidence(img: np.ndarray) -> dict[str, Any]:
    """What a whole generated image (no source photo to compare with) shows by itself: noise
    level per cell of a 3 by 3 grid, the strongest periodic peak of the noise residual's
    spectrum (upsampling layers leave a grid there) relative to the spectrum's median, local
    sharpness per cell and the mean colour saturation."""
    grey = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY).astype(np.float64)
    h, w = grey.shape
    cells = [
        grey[i * h // 3 : (i + 1) * h // 3, j * w // 3 : (j + 1) * w // 3]
        for i in range(3)
        for j in range(3)
    ]
    noise = [noise_sigma(c) for c in cells if min(c.shape) >= 3]
    lap = [float(cv2.Laplacian(c, cv2.CV_64F).var()) for c in cells]
    resid = grey - cv2.GaussianBlur(grey, (3, 3), 0)
    spec = np.abs(np.fft.fftshift(np.fft.fft2(resid - resid.mean())))
    yy, xx = np.mgrid[:h, :w]
    r = np.hypot((yy - h // 2) / max(h / 2, 1), (xx - w // 2) / max(w / 2, 1))
    band = spec[(r > 0.25) & (r <= 1.0)]  # high frequencies, away from image structure
    peak = float(band.max() / max(float(np.median(band)), 1e-9)) if band.size else 0.0
    hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV)
    return {
        "noise_min": min(noise) if noise else 0.0,
        "noise_max": max(noise) if noise else 0.0,
        "detail_min": min(lap),
        "detail_max": max(lap),
        "peak_ratio": peak,
        "saturation": float(hsv[..., 1].mean()) / 255,
    }


PERIODIC = 12.0  # a residual-spectrum peak this many times the median is a repeating pattern
GRAINLESS = 0.8  # grey levels: below this everywhere, no camera grain (as for reals above)


def complex_generated(ev: dict[str, Any], entity: str, variant: int = 0) -> str:
    """A text-to-image sample's measured statistics as evidence (no difference record exists:
    nothing was edited, the whole frame was generated)."""
    first = (
        _sentence(f"the {entity} and the rest of the frame were generated, not photographed")
        if variant % 2 == 0
        else _sentence(f"look at the {entity}: like the whole frame, it was synthesised")
    )
    spread = ev["noise_max"] - ev["noise_min"]
    noise = _sentence(
        f"noise ranges from {ev['noise_min']:.1f} to {ev['noise_max']:.1f} grey levels over a 3 "
        "by 3 grid"
        + (", almost no camera grain anywhere" if ev["noise_max"] < GRAINLESS else "")
        + (", uneven for one exposure" if spread > max(1.0, ev["noise_min"]) else "")
    )
    periodic = (
        "a repeating pattern of the kind upsampling layers leave"
        if ev["peak_ratio"] >= PERIODIC
        else "no repeating pattern stands out"
    )
    times = f"{ev['peak_ratio']:.0f}" if ev["peak_ratio"] < 1000 else "over 1000"
    spectrum = _sentence(
        f"the strongest high-frequency peak of the noise spectrum is {times} times its median: "
        f"{periodic}"
    )
    detail = _sentence(
        f"local sharpness over the grid ranges from {ev['detail_min']:.0f} to "
        f"{ev['detail_max']:.0f}, and colour saturation averages {ev['saturation'] * 100:.0f}%"
    )
    parts = [first, noise, spectrum, detail]
    if variant % 2 == 1:
        parts = [first, spectrum, noise, detail]
    return " ".join(parts)


def simple_generated(ev: dict[str, Any], entity: str, variant: int = 0) -> str:
    """The most telling measured statistic in plain words."""
    if ev["peak_ratio"] >= PERIODIC:
        reason = "a faint repeating grid runs through its fine detail"
    elif ev["noise_max"] < GRAINLESS:
        reason = "it has none of the grain a camera leaves"
    elif ev["noise_max"] - ev["noise_min"] > max(1.0, ev["noise_min"]):
        reason = "its grain is heavy in some places and missing in others"
    else:
        reason = "its grain is equally strong across the whole frame"
    if variant % 2 == 0:
        return f"This picture was generated, not photographed. Look at the {entity}: {reason}."
    return _sentence(f"the {entity} gives it away: {reason}, so the picture was generated")
