"""Offline image understanding: regions and a factual caption computed from pixels.

Used when a photo has no manifest caption. It names what it can measure — colours, layout,
brightness, texture — and nothing it cannot (no object recognition without a model).
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

COLOURS = {
    "black": (20, 20, 20),
    "white": (235, 235, 235),
    "grey": (128, 128, 128),
    "red": (200, 40, 40),
    "orange": (230, 130, 40),
    "yellow": (225, 210, 60),
    "green": (60, 160, 70),
    "blue": (50, 90, 200),
    "brown": (120, 80, 50),
    "pink": (230, 150, 180),
    "purple": (130, 60, 160),
}


def colour_name(rgb: np.ndarray | list[float]) -> str:
    c = np.asarray(rgb, dtype=np.float64)
    best = min(COLOURS.items(), key=lambda kv: float(np.sum((np.array(kv[1]) - c) ** 2)))
    return best[0]


def position_name(cx: float, cy: float) -> str:
    v = "upper" if cy < 1 / 3 else ("lower" if cy > 2 / 3 else "middle")
    h = "left" if cx < 1 / 3 else ("right" if cx > 2 / 3 else "centre")
    if v == "middle" and h == "centre":
        return "centre"
    if v == "middle":
        return f"middle {h}"
    return f"{v} {h}" if h != "centre" else f"{v} centre"


def regions(img: np.ndarray, n: int = 6, min_frac: float = 0.01) -> list[dict[str, Any]]:
    """The n largest coherent segments (Felzenszwalb on a 128-px copy), largest first."""
    h, w = img.shape[:2]
    scale = 128 / max(h, w)
    # Bilinear: what this has always computed (INTER_AREA was once passed in ``dst``'s place and
    # ignored); area resampling would move the segments and every table described from them.
    size = (max(8, round(w * scale)), max(8, round(h * scale)))
    small = cv2.resize(img, size, interpolation=cv2.INTER_LINEAR)
    from skimage.segmentation import felzenszwalb  # lazy: ~0.4 s, only when describing

    seg = felzenszwalb(small, scale=200, sigma=0.8, min_size=int(small.size / 3 * min_frac))
    sh, sw = seg.shape
    out = []
    for label in np.unique(seg):
        ys, xs = np.nonzero(seg == label)
        frac = len(xs) / seg.size
        if frac < min_frac or frac > 0.6:
            continue
        bbox = [xs.min() / sw, ys.min() / sh, (xs.max() + 1) / sw, (ys.max() + 1) / sh]
        mean = small[ys, xs].mean(axis=0)
        cx, cy = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
        name = f"{colour_name(mean)} region at the {position_name(cx, cy)}"
        out.append(
            {
                "name": name,
                "bbox": [round(float(b), 4) for b in bbox],
                "area": round(frac, 4),
                "mean_rgb": [round(float(m), 1) for m in mean],
            }
        )
    out.sort(key=lambda r: -r["area"])
    # make names unique
    seen: dict[str, int] = {}
    for r in out:
        k = seen.get(r["name"], 0)
        seen[r["name"]] = k + 1
        if k:
            r["name"] = f"{r['name']} ({k + 1})"
    return out[:n]


def describe(img: np.ndarray) -> tuple[str, list[dict[str, Any]]]:
    """A factual caption from measurable properties, and the regions it mentions."""
    regs = regions(img)
    grey = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY).astype(np.float64)
    chroma = float(np.abs(img.astype(np.float64) - img.mean(axis=2, keepdims=True)).mean())
    bright = grey.mean() / 255
    tone = "dark" if bright < 0.35 else ("bright" if bright > 0.65 else "moderately lit")
    sharp = float(cv2.Laplacian(grey, cv2.CV_64F).var())
    texture = (
        "fine, detailed texture"
        if sharp > 500
        else ("smooth areas" if sharp < 80 else "mixed texture")
    )
    kind = "greyscale photograph" if chroma < 3 else "colour photograph"
    h, w = img.shape[:2]
    orient = "landscape" if w > h * 1.1 else ("portrait" if h > w * 1.1 else "square")
    top = grey[: h // 3].mean()
    bottom = grey[2 * h // 3 :].mean()
    light = (
        "lighter at the top"
        if top > bottom + 15
        else ("lighter at the bottom" if bottom > top + 15 else "evenly lit from top to bottom")
    )
    parts = [f"A {tone} {orient} {kind} with {texture}, {light}."]
    if regs:
        named = ", ".join(r["name"] for r in regs[:3])
        parts.append(f"Distinct areas include a {named}.")
    return " ".join(parts), regs
