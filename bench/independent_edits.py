"""An independent editor for measuring Edit-Check: edits forenset's editors did not make.

Plain OpenCV/numpy, sharing no code with ``forenset.backends.image``: recolour, patch paste,
inpaint, brighten, darken and blur inside a feathered ellipse of a given target box, with
known faults at graded strengths and coverages:

- ``good``: strength 0.75-1, the whole ellipse;
- ``missing``: nothing, a re-encode, or a change too faint to see (strength <= 0.06);
- ``partial``: too weak (strength 0.15-0.4) or too small (0.12-0.45 of the ellipse);
- ``off_target``: the edit made in another box of the same size, away from the target;
- ``artefact``: a good edit plus a global degradation (JPEG blocking, noise, a colour cast
  outside the box).

Each fault has a ``blatant`` and a ``subtle`` band. A blur or an inpaint is only asked of a
textured target (over a flat one it changes nothing: no truth to measure), and no operation
is asked of a target it cannot visibly change (``visible``: brightening a white wall). Images: the bundled sample photos with
their manifest's entity boxes, and procedural renders (textured shapes on gradients) with the
shapes' boxes. Each candidate is a row of an external listing (instruction, kind, target box)
plus the edited image, so Edit-Check sees it as an imported edit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

OPS = ("recolour", "patch", "inpaint", "brighten", "darken", "blur")
# the kind an external listing names for each operation (blur has no forenset kind)
LISTED_KIND = {
    "recolour": "recolor",
    "patch": "replacement",
    "inpaint": "removal",
    "brighten": "lighting",
    "darken": "lighting",
    "blur": "blur",
}
TEXT = {
    "recolour": "Change the colour of the {t} to a different hue",
    "patch": "Replace the {t} with other content from the scene",
    "inpaint": "Remove the {t} and fill in the background",
    "brighten": "Make the {t} noticeably brighter",
    "darken": "Make the {t} noticeably darker",
    "blur": "Blur the {t} heavily",
}
FAULTS = {"good": 111, "missing": 40, "partial": 45, "off_target": 41, "artefact": 38}
DISCARD_FAULTS = ("missing", "partial", "off_target", "artefact")
# the failure category Edit-Check should name for each fault
EXPECTED_CATEGORY = {
    "good": "none",
    "missing": "edit_missing",
    "partial": "edit_partial",
    "off_target": "off_target",
    "artefact": "severe_artifacts",
}


@dataclass
class Candidate:
    real: np.ndarray
    fake: np.ndarray
    listing: dict[str, Any]  # the external listing's row: instruction, kind, target, bbox
    fault: str
    band: str
    op: str
    detail: dict[str, Any] = field(default_factory=dict)


def _px(box: list[float], h: int, w: int) -> tuple[int, int, int, int]:
    return int(box[0] * w), int(box[1] * h), int(np.ceil(box[2] * w)), int(np.ceil(box[3] * h))


def ellipse_mask(
    shape: tuple[int, int], box: list[float], cover: float, rng: np.random.Generator
) -> np.ndarray:
    """A feathered ellipse in ``box`` (float 0..1); ``cover`` < 1 shrinks it to that share of
    the full ellipse's area, placed at random inside the box."""
    h, w = shape
    x0, y0, x1, y1 = _px(box, h, w)
    ax, ay = max(2.0, (x1 - x0) / 2 * 0.95), max(2.0, (y1 - y0) / 2 * 0.95)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    if cover < 1:
        s = float(np.sqrt(cover))
        cx += rng.uniform(-1, 1) * ax * (1 - s)
        cy += rng.uniform(-1, 1) * ay * (1 - s)
        ax, ay = ax * s, ay * s
    m = np.zeros((h, w), np.float32)
    cv2.ellipse(m, (int(cx), int(cy)), (int(ax), int(ay)), 0, 0, 360, 1.0, -1)
    sigma = max(1.0, 0.12 * min(ax, ay))
    return np.clip(cv2.GaussianBlur(m, (0, 0), sigma) * 1.15, 0, 1)


def _edited(img: np.ndarray, op: str, box: list[float], rng: np.random.Generator) -> np.ndarray:
    """The full-strength edit of the whole image (the mask decides where it lands)."""
    h, w = img.shape[:2]
    f = img.astype(np.float32)
    if op == "recolour":
        hsv = cv2.cvtColor(f / 255.0, cv2.COLOR_RGB2HSV)
        hsv[..., 0] = (hsv[..., 0] + rng.uniform(100, 260)) % 360
        hsv[..., 1] = np.maximum(hsv[..., 1], 0.6)
        hsv[..., 2] = np.clip(hsv[..., 2], 0.25, 0.95)
        return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB) * 255.0
    if op == "patch":
        x0, y0, x1, y1 = _px(box, h, w)
        bw, bh = x1 - x0, y1 - y0
        for _ in range(20):  # a same-size patch from elsewhere, overlapping the box little
            px, py = int(rng.integers(0, max(1, w - bw))), int(rng.integers(0, max(1, h - bh)))
            if abs(px - x0) > bw * 0.6 or abs(py - y0) > bh * 0.6:
                break
        out = f.copy()
        patch = f[py : py + bh, px : px + bw]
        out[y0 : y0 + patch.shape[0], x0 : x0 + patch.shape[1]] = patch
        return out
    if op == "inpaint":
        m = np.zeros((h, w), np.uint8)
        x0, y0, x1, y1 = _px(box, h, w)
        cv2.ellipse(
            m,
            ((x0 + x1) // 2, (y0 + y1) // 2),
            ((x1 - x0) // 2, (y1 - y0) // 2),
            0,
            0,
            360,
            255,
            -1,
        )
        return cv2.inpaint(img, m, 5, cv2.INPAINT_TELEA).astype(np.float32)
    if op == "brighten":
        return np.clip(f * 1.45 + 35, 0, 255)
    if op == "darken":
        return f * 0.5
    if op == "blur":
        return cv2.GaussianBlur(f, (0, 0), max(3.0, min(h, w) / 40))
    raise ValueError(op)


def apply(
    img: np.ndarray,
    op: str,
    box: list[float],
    strength: float,
    cover: float,
    rng: np.random.Generator,
) -> np.ndarray:
    if strength <= 0:
        return img.copy()
    m = ellipse_mask(img.shape[:2], box, cover, rng)[..., None] * strength
    full = _edited(img, op, box, rng)
    return np.clip(img.astype(np.float32) * (1 - m) + full * m, 0, 255).round().astype(np.uint8)


def jpeg(img: np.ndarray, quality: int) -> np.ndarray:
    ok, buf = cv2.imencode(".jpg", img[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    return cv2.imdecode(buf, cv2.IMREAD_COLOR)[..., ::-1].copy()


def degrade(
    img: np.ndarray, box: list[float], band: str, rng: np.random.Generator
) -> tuple[np.ndarray, dict[str, Any]]:
    """A global degradation: JPEG blocking, noise, or a colour cast outside the box."""
    how = str(rng.choice(["jpeg", "noise", "cast"]))
    blatant = band == "blatant"
    if how == "jpeg":
        q = int(rng.integers(3, 9) if blatant else rng.integers(9, 16))
        return jpeg(img, q), {"artefact": how, "quality": q}
    if how == "noise":
        sd = float(rng.uniform(9, 16) if blatant else rng.uniform(5, 9))
        n = rng.normal(0, sd, img.shape)
        return np.clip(img + n, 0, 255).astype(np.uint8), {"artefact": how, "sigma": round(sd, 1)}
    mag = float(rng.uniform(22, 35) if blatant else rng.uniform(12, 22))
    v = rng.normal(0, 1, 3)
    v = v - v.mean()  # a hue cast, not a brightness change
    v = v / max(1e-6, np.linalg.norm(v)) * mag
    h, w = img.shape[:2]
    x0, y0, x1, y1 = _px(box, h, w)
    out = np.clip(img.astype(np.float32) + v, 0, 255)
    out[y0:y1, x0:x1] = img[y0:y1, x0:x1]
    return out.astype(np.uint8), {"artefact": how, "shift": round(mag, 1)}


def _away(box: list[float], rng: np.random.Generator) -> list[float] | None:
    """A box of the same size that keeps clear of ``box`` (with a margin)."""
    bw, bh = box[2] - box[0], box[3] - box[1]
    for _ in range(60):
        x, y = rng.uniform(0, 1 - bw), rng.uniform(0, 1 - bh)
        o = [x, y, x + bw, y + bh]
        if (
            o[0] > box[2] + 0.08
            or o[2] < box[0] - 0.08
            or o[1] > box[3] + 0.08
            or o[3] < box[1] - 0.08
        ):
            return [round(v, 4) for v in o]
    return None


def render(rng: np.random.Generator, size: int) -> tuple[np.ndarray, list[tuple[str, list[float]]]]:
    """A procedural scene: a shaded gradient, textured shapes; their boxes are the targets."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    c0, c1 = rng.uniform(40, 220, 3), rng.uniform(40, 220, 3)
    t = (xx * rng.uniform(0.3, 1) + yy * rng.uniform(0.3, 1))[..., None] / 2
    img = c0 * (1 - t) + c1 * t
    img += rng.normal(0, 1, (size, size, 1)).astype(np.float32) * 4
    shapes = []
    for i in range(int(rng.integers(2, 4))):
        bw, bh = rng.uniform(0.22, 0.4, 2)
        x0, y0 = rng.uniform(0, 1 - bw), rng.uniform(0, 1 - bh)
        box = [x0, y0, x0 + bw, y0 + bh]
        X0, Y0, X1, Y1 = _px(box, size, size)
        col = rng.uniform(20, 235, 3)
        freq = rng.uniform(6, 20)
        stripes = (np.sin((xx + yy * rng.uniform(-1, 1)) * freq * np.pi) * 25)[..., None]
        m = np.zeros((size, size), np.float32)
        if i % 2:
            cv2.rectangle(m, (X0, Y0), (X1 - 1, Y1 - 1), 1.0, -1)
        else:
            cv2.ellipse(
                m,
                ((X0 + X1) // 2, (Y0 + Y1) // 2),
                ((X1 - X0) // 2, (Y1 - Y0) // 2),
                0,
                0,
                360,
                1.0,
                -1,
            )
        m = cv2.GaussianBlur(m, (0, 0), 1.0)[..., None]
        img = img * (1 - m) + (col + stripes) * m
        shapes.append((f"shape {i + 1}", [round(v, 4) for v in box]))
    return np.clip(img, 0, 255).astype(np.uint8), shapes


def scenes(
    size: int, n_renders: int, rng: np.random.Generator
) -> list[tuple[str, np.ndarray, list]]:
    """(name, image, [(entity, box)]) for the bundled sample photos and ``n_renders`` renders."""
    from forenset.images import decode_rgb
    from forenset.tasks.sources import load_sample_bytes, sample_manifest

    out = []
    for m in sample_manifest():
        try:
            img = decode_rgb(load_sample_bytes(m["loader"]))
        except Exception:  # noqa: BLE001 - a photo the installed packages do not ship
            continue
        h, w = img.shape[:2]
        s = size / max(h, w)
        img = cv2.resize(
            img, (max(8, round(w * s)), max(8, round(h * s))), interpolation=cv2.INTER_AREA
        )
        ents = [(e["name"], list(e["bbox"])) for e in m.get("entities", [])]
        ents = [(n, b) for n, b in ents if (b[2] - b[0]) * (b[3] - b[1]) <= 0.4]
        if ents:
            out.append((m["name"], img, ents))
    for i in range(n_renders):
        img, ents = render(rng, size)
        out.append((f"render{i}", img, ents))
    return out


def textured(img: np.ndarray, box: list[float]) -> bool:
    """Whether the ellipse the edit fills holds texture a blur or an inpaint would remove:
    blurring a clear sky (or the flat inside of a shape) changes no pixel, so such an edit has
    no truth to measure (the set avoids it)."""
    h, w = img.shape[:2]
    inner = ellipse_mask((h, w), box, 1.0, np.random.default_rng(0)) > 0.5
    g = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY).astype(np.float32)
    hp = np.abs(g - cv2.GaussianBlur(g, (0, 0), 1.0))
    return bool(inner.any()) and float(hp[inner].mean()) > 2.0


def visible(img: np.ndarray, op: str, box: list[float], limit: float = 12.0) -> bool:
    """Whether ``op`` at full strength visibly changes the ellipse it fills (mean |ΔRGB| over
    ``limit``): brightening a clipped white area or darkening a black one changes nothing, and
    an edit nobody can see has no truth to measure (the set avoids it)."""
    rng = np.random.default_rng(0)
    inner = ellipse_mask(img.shape[:2], box, 1.0, rng) > 0.5
    full = apply(img, op, box, 1.0, 1.0, rng)
    diff = np.abs(full.astype(np.float32) - img.astype(np.float32)).mean(axis=2)
    return bool(inner.any()) and float(diff[inner].mean()) > limit


def make_set(
    seed: int, n: int = 275, size: int = 192, faults: dict[str, int] | None = None
) -> list[Candidate]:
    """``n`` candidates (fault mix scaled from ``faults``), reproducible from ``seed``."""
    rng = np.random.default_rng(seed)
    mix = faults or FAULTS
    total = sum(mix.values())
    plan = [f for f, k in mix.items() for _ in range(max(1, round(k * n / total)))][:n]
    rng.shuffle(plan)
    pool = scenes(size, 12, rng)
    out = []
    for row, fault in enumerate(plan):
        name, img, ents = pool[int(rng.integers(len(pool)))]
        target, box = ents[int(rng.integers(len(ents)))]
        op = OPS[int(rng.integers(len(OPS)))]
        if op in ("blur", "inpaint") and not textured(img, box):
            op = str(rng.choice(["recolour", "patch", "brighten", "darken"]))
        if not visible(img, op, box):  # e.g. brightening a white wall: no truth to measure
            op = next((o for o in ("recolour", "patch", "darken") if visible(img, o, box)), op)
        band = "blatant" if rng.random() < 0.5 else "subtle"
        detail: dict[str, Any] = {}
        strength, cover, where = rng.uniform(0.75, 1.0), rng.uniform(0.85, 1.0), box
        if fault == "good":
            band = "full"
        elif fault == "missing":
            strength = 0.0 if band == "blatant" else rng.uniform(0.02, 0.06)
        elif fault == "partial":
            if rng.random() < 0.5:
                strength = rng.uniform(0.15, 0.25) if band == "blatant" else rng.uniform(0.25, 0.4)
                detail["partial"] = "weak"
            else:
                cover = rng.uniform(0.12, 0.28) if band == "blatant" else rng.uniform(0.28, 0.45)
                detail["partial"] = "small"
        elif fault == "off_target":
            where = _away(box, rng)
            if where is None:  # no room for a separate box: an artefact instead
                fault, where = "artefact", box
            elif band == "subtle":
                strength = rng.uniform(0.5, 0.75)
        fake = apply(img, op, where, strength, cover, rng)
        if fault == "artefact":
            fake, d = degrade(fake, box, band, rng)
            detail.update(d)
        elif rng.random() < 0.5:  # external editors often hand back a re-encoded image
            q = int(rng.integers(88, 97))
            fake = jpeg(fake, q)
            detail["reencoded"] = q
        detail.update(strength=round(float(strength), 3), cover=round(float(cover), 3))
        if where is not box:
            detail["edited_box"] = where
        listing = {
            "row": row,
            "instruction": TEXT[op].format(t=target),
            "kind": LISTED_KIND[op],
            "target": target,
            "bbox": [round(v, 4) for v in box],
            "generator": "independent",
        }
        out.append(Candidate(img, fake, listing, fault, band, op, detail | {"image": name}))
    return out
