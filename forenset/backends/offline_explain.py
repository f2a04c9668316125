"""Template explanations built from measured evidence: the difference record for fakes,
image statistics for reals. Every sentence states something computed from the data."""

from __future__ import annotations

import json
import re
from typing import Any

import cv2
import numpy as np

LEAK_PATTERNS = [
    r"\binstruction(s)?\b",
    r"\bcompared (to|with) the original\b",
    r"\bthe original (image|photo)\b",
    r"\breference image\b",
    r"\bdifference record\b",
    r"\bthe edit (says|asks)\b",
    r"\bprompt\b",
]

KIND_EVIDENCE = {
    "copy_move": "the same texture and outline appear twice, with identical fine detail that real repeats never share",
    "removal": "the surface there is smeared and over-smooth, and the surrounding texture does not continue through it",
    "recolor": "its colour is unnaturally uniform and the colour boundary does not follow the object's own edges",
    "local_warp": "straight edges bend and the texture is stretched unevenly, as if the patch were skewed",
    "liquify": "the texture is stretched radially around a centre point, a deformation no camera produces",
    "lighting": "the brightness there does not match the direction and strength of the light in the rest of the scene",
    "splice": "its edges, noise grain and lighting differ from the surroundings, so it reads as pasted in",
}
PLAIN = {
    "copy_move": "the same thing appears twice, exactly alike",
    "removal": "that spot looks smudged, as if something was wiped away",
    "recolor": "its colour looks painted on",
    "local_warp": "its shape looks bent in a way the camera could not cause",
    "liquify": "it looks stretched, like melted plastic",
    "lighting": "the light on it does not match the rest of the picture",
    "splice": "it looks cut out from another picture and pasted in",
}
# kinds without a classical signature (model edits, imported edits): say only what differs
OTHER_EVIDENCE = "its local detail and texture differ from the original photograph there"
OTHER_PLAIN = "it looks different from the rest of the picture"


def leaks(text: str) -> list[str]:
    return [p for p in LEAK_PATTERNS if re.search(p, text, re.I)]


def mentioned(text: str, entities: list[str]) -> list[str]:
    low = text.lower()
    return [e for e in entities if e and e.lower() in low]


def complex_fake(ins: dict[str, Any], diffs: list[dict[str, Any]], variant: int = 0) -> str:
    t, loc, kind = ins["target"], ins["location_hint"], ins["kind"]
    main = [d for d in diffs if d.get("change_type") != "artifact"]
    evidence = KIND_EVIDENCE.get(kind, OTHER_EVIDENCE)
    parts = [f"The {t} at the {loc} shows signs of manipulation: {evidence}."]
    for d in main[:2]:
        parts.append(
            f"A {d['change_type']} covers about {d['area'] * 100:.1f}% of the frame at the "
            f"{d['region']} (salience {d['salience']} of 5)."
        )
    art = [d for d in diffs if d.get("change_type") == "artifact"]
    if art:
        parts.append("Fine high-frequency grain is spread unevenly across the image.")
    if variant % 2 == 0:
        parts.append(f"The boundary around the {t} is where the local detail breaks.")
    else:
        parts.append(
            f"Look closely at the edges of the {t}: the local detail changes abruptly there."
        )
    return " ".join(parts)


def simple_fake(ins: dict[str, Any], complex_text: str, variant: int = 0) -> str:
    t, loc, kind = ins["target"], ins["location_hint"], ins["kind"]
    if variant % 2 == 0:
        return f"This picture was changed. Look at the {t} at the {loc}: {PLAIN.get(kind, OTHER_PLAIN)}."
    return f"The {t} at the {loc} gives it away: {PLAIN.get(kind, OTHER_PLAIN)}, so the picture was edited."


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
    ev = image_evidence(img)
    ents = entities[:2] or ["scene"]
    e1 = ents[0]
    e2 = ents[1] if len(ents) > 1 else ents[0]
    noise = "a fine, even sensor grain" if ev["noise_sigma"] > 0.8 else "very low, uniform noise"
    parts = [
        f"The {e1} and the {e2} are lit consistently {ev['light']}, and their shadows and highlights agree.",
        f"The image has {noise} (about {ev['noise_sigma']:.1f} grey levels) across flat and textured areas alike.",
        f"Texture detail varies smoothly with focus and depth (local sharpness from {ev['detail_min']:.0f} to "
        f"{ev['detail_max']:.0f}), with no pasted or smeared patches.",
    ]
    if variant % 2 == 1:
        parts.append(f"Edges around the {e1} are continuous and follow its material.")
    return " ".join(parts)


def entity_names(entities_json: str | None, extra: list[str] | None = None) -> list[str]:
    names = [e["name"] for e in json.loads(entities_json or "[]") if e.get("name")]
    return list(dict.fromkeys((extra or []) + names))
