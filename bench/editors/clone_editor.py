"""Independent editor "clone": Poisson cloning, colour transfer, Navier-Stokes inpainting.

Shares no code with forenset's generators, bench/independent_edits.py or the other editors
in bench/editors/. Its own operations, masks, photos and encoder:

- masks: a feathered random polygon (convex hull of 12 points) filling ~3/4 of the box;
- recolour: Reinhard colour transfer in Lab toward a random swatch of another hue;
- paste: ``cv2.seamlessClone`` (NORMAL_CLONE) of a region of a *different* photo;
- inpaint: ``cv2.inpaint`` Navier-Stokes over the polygon;
- brighten / darken: a gamma curve on value (0.45-0.6 / 1.8-2.4);
- blur: a box filter;
- photos: scikit-image's astronaut, coffee, immunohistochemistry, retina, hubble (random
  boxes) and procedural checker/ring renders; encoded with Pillow (JPEG/WebP).

Truth follows bench/editors/README.md (the same specification for every editor; brighten /
darken blends are set from the absolute ΔL* they give, 16 for a full edit). Truth: good (alpha 0.8-1 over the polygon), missing (nothing or alpha <= 0.05), partial
(alpha 0.15-0.4, or a polygon over 10-40 % of the box), off-target (the edit in another box),
artefact (a good edit plus Pillow JPEG q 2-12, Gaussian luma noise, or a channel-gain cast
outside the box). An operation that cannot visibly change the target is not asked.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np
from PIL import Image

NAME = "clone"
KINDS = {  # operation -> the kind its listing names
    "recolour": "recolor",
    "paste": "splice",
    "inpaint": "removal",
    "brighten": "lighting",
    "darken": "lighting",
    "blur": "blur",
}
PROMPT = {
    "recolour": "Give the {t} a different colour",
    "paste": "Paste new content over the {t}",
    "inpaint": "Erase the {t}",
    "brighten": "Brighten the {t}",
    "darken": "Darken the {t}",
    "blur": "Blur out the {t}",
}
MIX = {"good": 90, "missing": 30, "partial": 40, "off_target": 30, "artefact": 30}
EXPECTED_CATEGORY = {
    "good": "none",
    "missing": "edit_missing",
    "partial": "edit_partial",
    "off_target": "off_target",
    "artefact": "severe_artifacts",
}


@dataclass
class Edit:
    real: np.ndarray
    fake: np.ndarray
    listing: dict[str, Any]
    fault: str
    band: str
    op: str
    detail: dict[str, Any] = field(default_factory=dict)


def photos(size: int) -> list[np.ndarray]:
    import skimage.data as sd

    out = []
    for name in ("astronaut", "coffee", "immunohistochemistry", "retina", "hubble_deep_field"):
        im = getattr(sd, name)()[..., :3]
        s = size / max(im.shape[:2])
        out.append(
            cv2.resize(
                im, (round(im.shape[1] * s), round(im.shape[0] * s)), interpolation=cv2.INTER_AREA
            )
        )
    return out


def checker_render(rng: np.random.Generator, size: int) -> np.ndarray:
    """Checkerboards and rings in random colours over a noisy background."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    base = rng.uniform(30, 200, 3) + rng.normal(0, 6, (size, size, 1))
    img = np.broadcast_to(base, (size, size, 3)).astype(np.float32).copy()
    for _ in range(3):
        cx, cy, r = (
            rng.uniform(0.2, 0.8) * size,
            rng.uniform(0.2, 0.8) * size,
            rng.uniform(0.12, 0.3) * size,
        )
        d = np.hypot(xx - cx, yy - cy)
        period = rng.uniform(4, 12)
        pat = (
            ((xx // period + yy // period) % 2)
            if rng.random() < 0.5
            else (np.sin(d / period * 2) > 0)
        )
        col_a, col_b = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
        tile = np.where(pat[..., None] > 0, col_a, col_b)
        inside = (d < r)[..., None]
        img = np.where(inside, tile, img)
    return np.clip(img, 0, 255).astype(np.uint8)


def pick_box(rng: np.random.Generator) -> list[float]:
    w, h = rng.uniform(0.2, 0.45), rng.uniform(0.2, 0.45)
    x, y = rng.uniform(0.02, 0.98 - w), rng.uniform(0.02, 0.98 - h)
    return [round(x, 4), round(y, 4), round(x + w, 4), round(y + h, 4)]


def polygon_mask(
    shape: tuple[int, ...], box: list[float], share: float, rng: np.random.Generator
) -> np.ndarray:
    """A feathered convex polygon over about ``share`` of the box (float 0..1)."""
    h, w = shape[:2]
    x0, y0, x1, y1 = box[0] * w, box[1] * h, box[2] * w, box[3] * h
    s = float(np.sqrt(share))
    bw, bh = (x1 - x0) * s, (y1 - y0) * s
    ox, oy = x0 + rng.uniform(0, (x1 - x0) - bw), y0 + rng.uniform(0, (y1 - y0) - bh)
    # 12 points at 1.0-1.3 of the inscribed ellipse's radius, clipped to the box: the hull
    # fills ~3/4 of it (a hull of points on the ellipse filled only ~1/2, between the other
    # editors' "good" (~0.7) and "partial: small" (<= 0.4) — no truth to measure)
    ang = np.sort(rng.uniform(0, 2 * np.pi, 12))
    rad = rng.uniform(1.0, 1.3, 12)
    pts = np.stack(
        [ox + bw / 2 * (1 + rad * np.cos(ang)), oy + bh / 2 * (1 + rad * np.sin(ang))], 1
    )
    pts = np.clip(pts, [ox, oy], [ox + bw, oy + bh])
    hull = cv2.convexHull(pts.astype(np.float32)).astype(np.int32)
    m = np.zeros((h, w), np.float32)
    cv2.fillConvexPoly(m, hull, 1.0)
    return cv2.blur(m, (5, 5))


def full_edit(
    img: np.ndarray, op: str, mask: np.ndarray, donors: list[np.ndarray], rng: np.random.Generator
) -> np.ndarray:
    """The operation at full strength over the whole frame (or the mask, for clone/inpaint)."""
    f = img.astype(np.float32)
    if op == "recolour":
        lab = cv2.cvtColor(img, cv2.COLOR_RGB2LAB).astype(np.float32)
        sel = mask > 0.5
        mu, sd = lab[sel].mean(0), lab[sel].std(0) + 1e-3
        ang = np.arctan2(mu[2] - 128, mu[1] - 128) + rng.uniform(0.6, 1.4) * np.pi
        chroma = rng.uniform(35, 55)
        tgt_mu = np.array([mu[0], 128 + chroma * np.cos(ang), 128 + chroma * np.sin(ang)])
        tgt_sd = np.array([sd[0], 6.0, 6.0])
        out = (lab - mu) / sd * tgt_sd + tgt_mu
        return cv2.cvtColor(np.clip(out, 0, 255).astype(np.uint8), cv2.COLOR_LAB2RGB).astype(
            np.float32
        )
    if op == "paste":
        donor = donors[int(rng.integers(len(donors)))]
        h, w = img.shape[:2]
        ys, xs = np.nonzero(mask > 0.5)
        y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
        dh, dw = y1 - y0, x1 - x0
        dy = int(rng.integers(0, max(1, donor.shape[0] - dh)))
        dx = int(rng.integers(0, max(1, donor.shape[1] - dw)))
        src = np.zeros_like(img)
        patch = donor[dy : dy + dh, dx : dx + dw]
        src[y0 : y0 + patch.shape[0], x0 : x0 + patch.shape[1]] = patch
        m8 = ((mask > 0.5) * 255).astype(np.uint8)
        m8[[0, -1], :] = 0
        m8[:, [0, -1]] = 0
        centre = ((x0 + x1) // 2, (y0 + y1) // 2)
        try:
            cloned = cv2.seamlessClone(
                src[..., ::-1].copy(), img[..., ::-1].copy(), m8, centre, cv2.NORMAL_CLONE
            )
        except cv2.error:
            return f
        return cloned[..., ::-1].astype(np.float32)
    if op == "inpaint":
        m8 = cv2.dilate(((mask > 0.2) * 255).astype(np.uint8), np.ones((3, 3), np.uint8))
        return cv2.inpaint(img, m8, 7, cv2.INPAINT_NS).astype(np.float32)
    if op in ("brighten", "darken"):
        g = rng.uniform(0.45, 0.6) if op == "brighten" else rng.uniform(1.8, 2.4)
        return 255.0 * (f / 255.0) ** g
    if op == "blur":
        k = max(5, img.shape[0] // 18) | 1
        return cv2.blur(f, (k, k))
    raise ValueError(op)


TONE = ("brighten", "darken")
TONE_REQUEST = 16.0  # the requested mean |ΔL*| of a brighten / darken (README.md)


def tone_change(img: np.ndarray, edited: np.ndarray, m: np.ndarray) -> float:
    """Mean |ΔL*| (OpenCV 8-bit Lab, L scaled back to 0-100) over the mask's core."""
    sel = m > 0.5
    if not sel.any():
        return 0.0
    la = cv2.cvtColor(img, cv2.COLOR_RGB2LAB)[..., 0].astype(np.float32)
    e8 = np.clip(edited, 0, 255).round().astype(np.uint8)
    lb = cv2.cvtColor(e8, cv2.COLOR_RGB2LAB)[..., 0].astype(np.float32)
    return float(np.abs(lb - la)[sel].mean() * 100 / 255)


def encode(img: np.ndarray, fmt: str, quality: int) -> np.ndarray:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format=fmt, quality=quality)
    return np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB")).copy()


def degrade(
    img: np.ndarray, box: list[float], band: str, rng: np.random.Generator
) -> tuple[np.ndarray, dict[str, Any]]:
    how = str(rng.choice(["jpeg", "noise", "cast"]))
    hard = band == "blatant"
    if how == "jpeg":
        q = int(rng.integers(2, 6) if hard else rng.integers(6, 13))
        return encode(img, "JPEG", q), {"artefact": how, "quality": q}
    if how == "noise":
        sd = float(rng.uniform(10, 16) if hard else rng.uniform(6, 10))
        luma = rng.normal(0, sd, img.shape[:2])[..., None]
        return np.clip(img + luma, 0, 255).astype(np.uint8), {
            "artefact": how,
            "sigma": round(sd, 1),
        }
    gain = (
        1
        + (rng.uniform(0.18, 0.3) if hard else rng.uniform(0.1, 0.18))
        * np.array([1.0, -0.4, -0.8])[rng.permutation(3)]
    )
    out = np.clip(img.astype(np.float32) * gain, 0, 255)
    h, w = img.shape[:2]
    x0, y0, x1, y1 = (
        int(box[0] * w),
        int(box[1] * h),
        int(np.ceil(box[2] * w)),
        int(np.ceil(box[3] * h)),
    )
    out[y0:y1, x0:x1] = img[y0:y1, x0:x1]
    return out.astype(np.uint8), {"artefact": how, "gain": [round(float(g), 3) for g in gain]}


def shows(img: np.ndarray, op: str, box: list[float], donors: list[np.ndarray]) -> bool:
    """Whether ``op`` at full strength visibly changes the target (mean |ΔRGB| > 12 inside)."""
    rng = np.random.default_rng(1)
    m = polygon_mask(img.shape, box, 1.0, rng)
    full = full_edit(img, op, m, donors, rng)
    d = np.abs(full - img.astype(np.float32)).mean(2)
    if op in TONE and tone_change(img, full, m) < TONE_REQUEST * 1.1:
        return False  # cannot reach the requested lightness change
    return bool((m > 0.5).any()) and float(d[m > 0.5].mean()) > 12


def elsewhere(box: list[float], rng: np.random.Generator) -> list[float] | None:
    bw, bh = box[2] - box[0], box[3] - box[1]
    for _ in range(80):
        x, y = rng.uniform(0, 1 - bw), rng.uniform(0, 1 - bh)
        if (
            x > box[2] + 0.06
            or x + bw < box[0] - 0.06
            or y > box[3] + 0.06
            or y + bh < box[1] - 0.06
        ):
            return [x, y, x + bw, y + bh]
    return None


def make_set(seed: int, n: int = 220, size: int = 192) -> list[Edit]:
    rng = np.random.default_rng(10_000 + seed)
    pool = photos(size) + [checker_render(rng, size) for _ in range(6)]
    total = sum(MIX.values())
    plan = [f for f, k in MIX.items() for _ in range(round(k * n / total))][:n]
    rng.shuffle(plan)
    out = []
    for row, fault in enumerate(plan):
        i = int(rng.integers(len(pool)))
        img, donors = pool[i], pool[:i] + pool[i + 1 :]
        first = str(rng.choice(list(KINDS)))
        found = None
        for op in [first] + [o for o in KINDS if o != first]:  # the drawn operation first
            for _ in range(30 if op == first else 8):  # a target it can visibly change
                box = pick_box(rng)
                if shows(img, op, box, donors):
                    found = op
                    break
            if found:
                break
        if found is None:
            continue
        op = found
        band = "full" if fault == "good" else ("blatant" if rng.random() < 0.5 else "subtle")
        alpha, share, where = rng.uniform(0.8, 1.0), rng.uniform(0.85, 1.0), box
        detail: dict[str, Any] = {"image": i}
        if fault == "missing":
            alpha = 0.0 if band == "blatant" else rng.uniform(0.02, 0.05)
        elif fault == "partial":
            if rng.random() < 0.5:
                alpha = rng.uniform(0.15, 0.25) if band == "blatant" else rng.uniform(0.25, 0.4)
                detail["partial"] = "weak"
            else:
                share = rng.uniform(0.1, 0.25) if band == "blatant" else rng.uniform(0.25, 0.4)
                detail["partial"] = "small"
        elif fault == "off_target":
            where = elsewhere(box, rng)
            if where is None:
                continue
            if band == "subtle":
                alpha = rng.uniform(0.55, 0.8)
        m = polygon_mask(img.shape, where, share, rng)
        if op in TONE:
            # the truth is absolute for tone edits (bench/editors/README.md): good reaches the
            # requested mean |ΔL*| over the edited area, partial <= 35 % of it, missing <= 5 %
            full = full_edit(img, op, m, donors, rng)
            got = tone_change(img, full, m)
            if got < TONE_REQUEST and fault != "off_target":
                continue  # this target cannot show the requested change: not asked
            unit = TONE_REQUEST / max(
                got, 1e-3
            )  # the blend that gives exactly the requested change
            if fault == "good" or (fault == "off_target" and band == "blatant"):
                alpha = max(alpha, min(1.0, unit))
            elif fault == "missing" and alpha > 0:
                alpha = rng.uniform(0.02, 0.05) * unit
            elif detail.get("partial") == "weak":
                alpha = (
                    rng.uniform(0.15, 0.25) if band == "blatant" else rng.uniform(0.25, 0.35)
                ) * unit
            elif fault == "partial" or fault == "artefact":
                alpha = max(alpha, min(1.0, unit))
            elif fault == "off_target":
                alpha = min(1.0, alpha * max(1.0, unit))
        if alpha > 0:
            full = full_edit(img, op, m, donors, rng) if op not in TONE else full
            a = (m * alpha)[..., None]
            fake = np.clip(img * (1 - a) + full * a, 0, 255).round().astype(np.uint8)
        else:
            fake = img.copy()
        if fault == "artefact":
            fake, d = degrade(fake, box, band, rng)
            detail.update(d)
        elif rng.random() < 0.5:
            fmt = str(rng.choice(["JPEG", "WEBP"]))
            q = int(rng.integers(86, 97))
            fake = encode(fake, fmt, q)
            detail["reencoded"] = f"{fmt} {q}"
        detail.update(alpha=round(float(alpha), 3), share=round(float(share), 3))
        listing = {
            "row": row,
            "instruction": PROMPT[op].format(t="marked region"),
            "kind": KINDS[op],
            "target": "marked region",
            "bbox": box,
            "generator": NAME,
        }
        out.append(Edit(img, fake, listing, fault, band, op, detail))
    return out
