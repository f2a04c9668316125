"""Independent editor "diffusion": a diffusion-like iterative denoise of the box, LCh hue turns.

Shares no code with forenset's generators, bench/independent_edits.py or the other editors
in bench/editors/. Its own operations, masks, photos and encoder:

- masks: a superellipse (rounded rectangle) feathered by a distance transform;
- inpaint: the region is replaced by noise around the surrounding ring's colour and denoised
  in 24 annealed steps (smooth, noise re-injected at a falling level, the ring held fixed),
  as a diffusion sampler's inpainting does;
- recolour: a hue turn of 90-200 degrees in LCh (lightness kept, chroma raised to >= 30);
- paste: copy-move of a same-size region of the same photo, flipped;
- brighten / darken: +22-35 / x0.45-0.6 on Lab lightness;
- blur: 40-70 steps of heat diffusion (explicit 5-point Laplacian);
- photos: forenset's bundled sample photos with their manifest's entity boxes, and tile
  renders (Voronoi-like cells with speckle); encoded with OpenCV's WebP / JPEG.

Truth follows bench/editors/README.md (the same specification for every editor; brighten /
darken blends are set from the absolute ΔL* they give, 16 for a full edit). Truth as the other editors: good / missing / partial / off-target / artefact; the artefacts
here are JPEG q 4-14, salt-and-pepper plus Gaussian grain, or an additive Lab a*b* cast
outside the box. An operation that cannot visibly change the target is not asked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

NAME = "diffusion"
KINDS = {
    "recolour": "recolor",
    "paste": "copy_move",
    "inpaint": "removal",
    "brighten": "brighten",
    "darken": "darken",
    "blur": "blur",
}
WORDS = {
    "recolour": "Recolour the {t}",
    "paste": "Cover the {t} with a copy of another part of the picture",
    "inpaint": "Remove the {t}",
    "brighten": "Make the {t} lighter",
    "darken": "Make the {t} darker",
    "blur": "Soften the {t} until its detail is gone",
}
SHARE = {"good": 100, "missing": 35, "partial": 40, "off_target": 35, "artefact": 35}
EXPECTED_CATEGORY = {
    "good": "none",
    "missing": "edit_missing",
    "partial": "edit_partial",
    "off_target": "off_target",
    "artefact": "severe_artifacts",
}


@dataclass
class Sample:
    real: np.ndarray
    fake: np.ndarray
    listing: dict[str, Any]
    fault: str
    band: str
    op: str
    detail: dict[str, Any] = field(default_factory=dict)


def scenes(
    size: int, rng: np.random.Generator
) -> list[tuple[np.ndarray, list[tuple[str, list[float]]]]]:
    from forenset.images import decode_rgb
    from forenset.tasks.sources import load_sample_bytes, sample_manifest

    out = []
    for m in sample_manifest():
        try:
            img = decode_rgb(load_sample_bytes(m["loader"]))
        except Exception:  # noqa: BLE001 - a photo the installed packages do not ship
            continue
        f = size / max(img.shape[:2])
        img = cv2.resize(
            img,
            (max(8, int(img.shape[1] * f)), max(8, int(img.shape[0] * f))),
            interpolation=cv2.INTER_LINEAR,
        )
        if img.ndim == 2:
            img = np.stack([img] * 3, -1)
        ents = [(e["name"], [float(v) for v in e["bbox"]]) for e in m.get("entities", [])]
        ents = [(n, b) for n, b in ents if 0.01 <= (b[2] - b[0]) * (b[3] - b[1]) <= 0.45]
        if ents:
            out.append((img, ents))
    for _ in range(8):
        out.append(tiles(rng, size))
    return out


def tiles(rng: np.random.Generator, size: int) -> tuple[np.ndarray, list[tuple[str, list[float]]]]:
    """Voronoi-like cells (nearest of 14 seeds) with speckle; the target boxes are cells."""
    seeds = rng.uniform(0, size, (14, 2))
    yy, xx = np.mgrid[0:size, 0:size]
    d = (xx[..., None] - seeds[:, 0]) ** 2 + (yy[..., None] - seeds[:, 1]) ** 2
    lab = d.argmin(-1)
    cols = rng.uniform(25, 230, (14, 3))
    img = cols[lab] + rng.normal(0, 9, (size, size, 1)) * rng.uniform(0.3, 1.5, (14, 1))[lab]
    ents = []
    for k in range(14):
        ys, xs = np.nonzero(lab == k)
        box = [xs.min() / size, ys.min() / size, (xs.max() + 1) / size, (ys.max() + 1) / size]
        if 0.03 <= (box[2] - box[0]) * (box[3] - box[1]) <= 0.3:
            ents.append((f"cell {k}", [round(v, 4) for v in box]))
    return np.clip(img, 0, 255).astype(np.uint8), ents


def superellipse(
    shape: tuple[int, ...], box: list[float], frac: float, rng: np.random.Generator
) -> np.ndarray:
    h, w = shape[:2]
    x0, y0, x1, y1 = box[0] * w, box[1] * h, box[2] * w, box[3] * h
    s = float(np.sqrt(frac))
    ax, ay = (x1 - x0) / 2 * 0.92 * s, (y1 - y0) / 2 * 0.92 * s
    cx = (x0 + x1) / 2 + rng.uniform(-1, 1) * ((x1 - x0) / 2 * 0.92 - ax)
    cy = (y0 + y1) / 2 + rng.uniform(-1, 1) * ((y1 - y0) / 2 * 0.92 - ay)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    r = (np.abs((xx - cx) / max(ax, 1)) ** 4 + np.abs((yy - cy) / max(ay, 1)) ** 4) ** 0.25
    hard = (r <= 1).astype(np.uint8)
    dist = cv2.distanceTransform(hard, cv2.DIST_L2, 3)
    return np.clip(dist / 3.0, 0, 1).astype(np.float32)


def denoise_fill(img: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Noise in the hole, then annealed smoothing steps that keep the known pixels."""
    f = img.astype(np.float32)
    hole = (mask > 0.05)[..., None]
    ring = (
        cv2.dilate(hole[..., 0].astype(np.uint8), np.ones((9, 9), np.uint8)).astype(bool)
        & ~hole[..., 0]
    )
    mu = f[ring].mean(0) if ring.any() else f.reshape(-1, 3).mean(0)
    x = np.where(hole, mu + rng.normal(0, 40, f.shape), f).astype(np.float32)
    steps = 24
    for t in range(steps):
        x = cv2.GaussianBlur(x, (0, 0), 2.0)
        x = x + rng.normal(0, 12 * (1 - t / steps), f.shape).astype(np.float32)
        x = np.where(hole, x, f)
    return np.clip(x, 0, 255)


def heat(img: np.ndarray, steps: int) -> np.ndarray:
    x = img.astype(np.float32)
    for _ in range(steps):
        p = cv2.copyMakeBorder(x, 1, 1, 1, 1, cv2.BORDER_REFLECT)
        lap = p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * x
        x = x + 0.24 * lap
    return x


def operate(
    img: np.ndarray, op: str, box: list[float], mask: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    f = img.astype(np.float32)
    if op == "inpaint":
        return denoise_fill(img, mask, rng)
    if op == "blur":
        return heat(img, int(rng.integers(40, 71)))
    if op == "paste":
        h, w = img.shape[:2]
        x0, y0 = int(box[0] * w), int(box[1] * h)
        bw, bh = max(2, int((box[2] - box[0]) * w)), max(2, int((box[3] - box[1]) * h))
        for _ in range(30):
            sx, sy = int(rng.integers(0, max(1, w - bw))), int(rng.integers(0, max(1, h - bh)))
            if abs(sx - x0) > 0.7 * bw or abs(sy - y0) > 0.7 * bh:
                break
        out = f.copy()
        src = f[sy : sy + bh, sx : sx + bw][:, ::-1]
        out[y0 : y0 + src.shape[0], x0 : x0 + src.shape[1]] = src
        return out
    lab = cv2.cvtColor(f / 255.0, cv2.COLOR_RGB2Lab)
    if op == "recolour":
        c = np.hypot(lab[..., 1], lab[..., 2])
        hue = np.arctan2(lab[..., 2], lab[..., 1]) + np.radians(rng.uniform(90, 200))
        c = np.maximum(c, 30.0)
        lab[..., 1], lab[..., 2] = c * np.cos(hue), c * np.sin(hue)
        lab[..., 0] = np.clip(lab[..., 0], 25, 85)
    elif op == "brighten":
        lab[..., 0] = np.minimum(100, lab[..., 0] + rng.uniform(22, 35))
    elif op == "darken":
        lab[..., 0] *= rng.uniform(0.45, 0.6)
    else:
        raise ValueError(op)
    return np.clip(cv2.cvtColor(lab, cv2.COLOR_Lab2RGB) * 255, 0, 255)


REQUESTED_DL = 16.0  # a brighten / darken asks for this mean |ΔL*| (README.md)


def lightness_shift(img: np.ndarray, edited: np.ndarray, m: np.ndarray) -> float:
    """Mean |ΔL*| (float Lab) where the superellipse is at least half on."""
    core = m > 0.5
    if not core.any():
        return 0.0
    la = cv2.cvtColor(img.astype(np.float32) / 255, cv2.COLOR_RGB2Lab)[..., 0]
    lb = cv2.cvtColor(np.clip(edited, 0, 255).astype(np.float32) / 255, cv2.COLOR_RGB2Lab)[..., 0]
    return float(np.abs(lb - la)[core].mean())


def reencode(img: np.ndarray, ext: str, q: int) -> np.ndarray:
    flag = cv2.IMWRITE_WEBP_QUALITY if ext == ".webp" else cv2.IMWRITE_JPEG_QUALITY
    ok, buf = cv2.imencode(ext, cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [flag, q])
    return cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


def spoil(
    img: np.ndarray, box: list[float], band: str, rng: np.random.Generator
) -> tuple[np.ndarray, dict[str, Any]]:
    kind = str(rng.choice(["jpeg", "grain", "cast"]))
    big = band == "blatant"
    if kind == "jpeg":
        q = int(rng.integers(4, 9) if big else rng.integers(9, 15))
        return reencode(img, ".jpg", q), {"artefact": kind, "quality": q}
    if kind == "grain":
        sd = float(rng.uniform(9, 14) if big else rng.uniform(6, 9))
        out = img + rng.normal(0, sd, img.shape)
        sp = rng.random(img.shape[:2]) < (0.01 if big else 0.004)
        out[sp] = rng.choice([0.0, 255.0], size=(int(sp.sum()), 1))
        return np.clip(out, 0, 255).astype(np.uint8), {"artefact": kind, "sigma": round(sd, 1)}
    lab = cv2.cvtColor(img.astype(np.float32) / 255, cv2.COLOR_RGB2Lab)
    mag = rng.uniform(14, 24) if big else rng.uniform(8, 14)
    ang = rng.uniform(0, 2 * np.pi)
    h, w = img.shape[:2]
    keep = np.zeros((h, w), bool)
    keep[int(box[1] * h) : int(np.ceil(box[3] * h)), int(box[0] * w) : int(np.ceil(box[2] * w))] = (
        True
    )
    lab[~keep, 1] += mag * np.cos(ang)
    lab[~keep, 2] += mag * np.sin(ang)
    out = np.clip(cv2.cvtColor(lab, cv2.COLOR_Lab2RGB) * 255, 0, 255).round().astype(np.uint8)
    return out, {"artefact": kind, "ab_shift": round(float(mag), 1)}


def can_change(img: np.ndarray, op: str, box: list[float]) -> bool:
    rng = np.random.default_rng(2)
    m = superellipse(img.shape, box, 1.0, rng)
    edited = operate(img, op, box, m, rng)
    if op in ("brighten", "darken") and lightness_shift(img, edited, m) < REQUESTED_DL * 1.1:
        return False
    d = np.abs(edited - img.astype(np.float32)).mean(2)
    sel = m > 0.5
    return bool(sel.any()) and float(d[sel].mean()) > 12


def free_box(box: list[float], rng: np.random.Generator) -> list[float] | None:
    bw, bh = box[2] - box[0], box[3] - box[1]
    for _ in range(80):
        x, y = rng.uniform(0, 1 - bw), rng.uniform(0, 1 - bh)
        sep_x = x > box[2] + 0.07 or x + bw < box[0] - 0.07
        sep_y = y > box[3] + 0.07 or y + bh < box[1] - 0.07
        if sep_x or sep_y:
            return [x, y, x + bw, y + bh]
    return None


def make_set(seed: int, n: int = 245, size: int = 192) -> list[Sample]:
    rng = np.random.default_rng(20_000 + seed)
    pool = scenes(size, rng)
    total = sum(SHARE.values())
    plan = [f for f, k in SHARE.items() for _ in range(round(k * n / total))][:n]
    rng.shuffle(plan)
    out = []
    for row, fault in enumerate(plan):
        img, ents = pool[int(rng.integers(len(pool)))]
        name, box = ents[int(rng.integers(len(ents)))]
        op = str(rng.choice(list(KINDS)))
        if not can_change(img, op, box):
            ok = [o for o in KINDS if can_change(img, o, box)]
            if not ok:
                continue
            op = str(rng.choice(ok))
        band = "full" if fault == "good" else ("blatant" if rng.random() < 0.5 else "subtle")
        strength, frac, where = rng.uniform(0.8, 1.0), rng.uniform(0.85, 1.0), box
        info: dict[str, Any] = {"target": name}
        if fault == "missing":
            strength = 0.0 if band == "blatant" else rng.uniform(0.02, 0.05)
        elif fault == "partial":
            if rng.random() < 0.5:
                strength = rng.uniform(0.15, 0.25) if band == "blatant" else rng.uniform(0.25, 0.4)
                info["partial"] = "weak"
            else:
                frac = rng.uniform(0.1, 0.25) if band == "blatant" else rng.uniform(0.25, 0.4)
                info["partial"] = "small"
        elif fault == "off_target":
            where = free_box(box, rng)
            if where is None:
                continue
            if band == "subtle":
                strength = rng.uniform(0.55, 0.8)
        m = superellipse(img.shape, where, frac, rng)
        edited = operate(img, op, where, m, rng)
        if op in ("brighten", "darken"):
            # absolute truth for tone edits (bench/editors/README.md): the blend is set from
            # the lightness change it gives, not from this editor's own full strength
            reach = lightness_shift(img, edited, m)
            if reach < REQUESTED_DL and fault != "off_target":
                continue  # the target cannot show the requested change: not asked
            one = REQUESTED_DL / max(reach, 1e-3)
            if fault == "missing":
                strength = 0.0 if band == "blatant" else rng.uniform(0.02, 0.05) * one
            elif info.get("partial") == "weak":
                lo, hi = (0.15, 0.25) if band == "blatant" else (0.25, 0.35)
                strength = rng.uniform(lo, hi) * one
            elif fault == "off_target" and band == "subtle":
                strength = min(1.0, strength * max(1.0, one))
            else:
                strength = max(strength, min(1.0, one))
        a = (m * strength)[..., None]
        fake = np.clip(img * (1 - a) + edited * a, 0, 255).round().astype(np.uint8)
        if fault == "artefact":
            fake, d = spoil(fake, box, band, rng)
            info.update(d)
        elif rng.random() < 0.5:
            ext = str(rng.choice([".jpg", ".webp"]))
            q = int(rng.integers(87, 97))
            fake = reencode(fake, ext, q)
            info["reencoded"] = f"{ext} {q}"
        info.update(strength=round(float(strength), 3), frac=round(float(frac), 3))
        listing = {
            "row": row,
            "instruction": WORDS[op].format(t=name),
            "kind": KINDS[op],
            "target": name,
            "bbox": [round(v, 4) for v in box],
            "generator": NAME,
        }
        out.append(Sample(img, fake, listing, fault, band, op, info))
    return out
