"""Independent editor "texture": patch-based texture synthesis, perspective warps, tone curves.

Shares no code with forenset's generators, bench/independent_edits.py or the other editors
in bench/editors/. Its own operations, masks, photos and encoder:

- masks: a blob (smoothed random field thresholded inside an inscribed ellipse), feathered;
- inpaint: patch-based synthesis — the region is filled in raster order with 9x9 patches
  copied from outside it, each the best of 24 random sources by overlap error;
- paste: a region of another photo, perspective-warped (``cv2.warpPerspective``) into the box;
- recolour: a rotation of RGB about the grey axis (120 or 240 degrees: a channel cycle) mixed
  with a saturation boost;
- brighten / darken: the "screen" / "multiply" blend curves, applied twice;
- blur: a motion-blur line kernel at a random angle;
- photos: scikit-learn's china and flower, scikit-image's chelsea, rocket, motorcycle and
  tinted brick / grass / gravel textures (random boxes); encoded by OpenCV JPEG at 4:2:0.

Truth follows bench/editors/README.md (the same specification for every editor; brighten /
darken blends are set from the absolute ΔL* they give, 16 for a full edit). Truth: good / missing / partial / off-target / artefact; artefacts are OpenCV JPEG q 3-14,
Poisson (shot) noise, or a per-channel offset cast outside the box.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

NAME = "texture"
KINDS = {
    "recolour": "recolor",
    "paste": "replacement",
    "inpaint": "removal",
    "brighten": "lighting",
    "darken": "lighting",
    "blur": "blur",
}
ASK = {
    "recolour": "Turn the {t} a new colour",
    "paste": "Replace the {t} with something else",
    "inpaint": "Take the {t} out of the picture",
    "brighten": "Light up the {t}",
    "darken": "Put the {t} in shadow, darker",
    "blur": "Motion-blur the {t}",
}
COUNTS = {"good": 100, "missing": 30, "partial": 40, "off_target": 30, "artefact": 30}
EXPECTED_CATEGORY = {
    "good": "none",
    "missing": "edit_missing",
    "partial": "edit_partial",
    "off_target": "off_target",
    "artefact": "severe_artifacts",
}


@dataclass
class Case:
    real: np.ndarray
    fake: np.ndarray
    listing: dict[str, Any]
    fault: str
    band: str
    op: str
    detail: dict[str, Any] = field(default_factory=dict)


def library(size: int, rng: np.random.Generator) -> list[np.ndarray]:
    import skimage.data as sd
    from sklearn.datasets import load_sample_image

    raw = [load_sample_image("china.jpg"), load_sample_image("flower.jpg")]
    raw += [sd.chelsea(), sd.rocket(), sd.stereo_motorcycle()[0]]
    for name in ("brick", "grass", "gravel"):
        g = getattr(sd, name)().astype(np.float32) / 255
        tint = rng.uniform(0.3, 1.0, 3)
        raw.append(
            (np.stack([g] * 3, -1) * tint * 255 + rng.uniform(0, 60, 3))
            .clip(0, 255)
            .astype(np.uint8)
        )
    out = []
    for im in raw:
        k = size / max(im.shape[:2])
        out.append(
            cv2.resize(
                im[..., :3],
                (int(im.shape[1] * k), int(im.shape[0] * k)),
                interpolation=cv2.INTER_AREA,
            )
        )
    return out


def blob(
    shape: tuple[int, ...], box: list[float], part: float, rng: np.random.Generator
) -> np.ndarray:
    h, w = shape[:2]
    x0, y0, x1, y1 = (
        int(box[0] * w),
        int(box[1] * h),
        int(np.ceil(box[2] * w)),
        int(np.ceil(box[3] * h)),
    )
    bw, bh = max(4, x1 - x0), max(4, y1 - y0)
    s = float(np.sqrt(part))
    ew, eh = max(3, int(bw * s)), max(3, int(bh * s))
    ox = x0 + int(rng.integers(0, max(1, bw - ew + 1)))
    oy = y0 + int(rng.integers(0, max(1, bh - eh + 1)))
    yy, xx = np.mgrid[0:eh, 0:ew].astype(np.float32)
    ell = ((xx - ew / 2) / (ew / 2)) ** 2 + ((yy - eh / 2) / (eh / 2)) ** 2
    field_ = cv2.GaussianBlur(
        rng.normal(0, 1, (eh, ew)).astype(np.float32), (0, 0), max(1.0, min(ew, eh) / 6)
    )
    field_ /= field_.std() + 1e-6
    local = (ell + 0.12 * field_ < 0.95).astype(np.float32)
    m = np.zeros((h, w), np.float32)
    m[oy : oy + eh, ox : ox + ew] = local[: h - oy, : w - ox]
    return cv2.GaussianBlur(m, (0, 0), 1.2)


def synthesise(img: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Raster-order patch fill: each 9x9 block of the hole from the best of 24 outside sources."""
    f = img.astype(np.float32).copy()
    hole = mask > 0.05
    h, w = hole.shape
    p = 9
    ys, xs = np.nonzero(hole)
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    known = ~hole
    for y in range(y0, y1, p - 2):
        for x in range(x0, x1, p - 2):
            yy, xx = min(y, h - p), min(x, w - p)
            tgt = f[yy : yy + p, xx : xx + p]
            kn = known[yy : yy + p, xx : xx + p]
            best, err = None, np.inf
            for _ in range(24):
                sy, sx = int(rng.integers(0, h - p)), int(rng.integers(0, w - p))
                if hole[sy : sy + p, sx : sx + p].any():
                    continue
                src = f[sy : sy + p, sx : sx + p]
                e = float(((src - tgt) ** 2)[kn].mean()) if kn.any() else float(rng.random())
                if e < err:
                    best, err = src, e
            if best is not None:
                fill = hole[yy : yy + p, xx : xx + p]
                f[yy : yy + p, xx : xx + p][fill] = best[fill]
                known[yy : yy + p, xx : xx + p] |= fill
    return f


def perspective_paste(
    img: np.ndarray, box: list[float], donor: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    h, w = img.shape[:2]
    dh, dw = donor.shape[:2]
    q = np.float32([[0, 0], [dw, 0], [dw, dh], [0, dh]])
    q = q + rng.uniform(-0.15, 0.15, (4, 2)).astype(np.float32) * np.float32([dw, dh])
    q = np.clip(q, 0, [dw - 1, dh - 1]).astype(np.float32)
    x0, y0, x1, y1 = box[0] * w, box[1] * h, box[2] * w, box[3] * h
    dst = np.float32([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
    H = cv2.getPerspectiveTransform(q, dst)
    return cv2.warpPerspective(
        donor, H, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT
    ).astype(np.float32)


def transform(
    img: np.ndarray,
    op: str,
    box: list[float],
    mask: np.ndarray,
    donors: list[np.ndarray],
    rng: np.random.Generator,
) -> np.ndarray:
    f = img.astype(np.float32) / 255
    if op == "inpaint":
        return synthesise(img, mask, rng)
    if op == "paste":
        return perspective_paste(img, box, donors[int(rng.integers(len(donors)))], rng)
    if op == "recolour":
        out = f[..., [1, 2, 0]] if rng.random() < 0.5 else f[..., [2, 0, 1]]
        grey = out.mean(-1, keepdims=True)
        out = (
            grey
            + (out - grey) * 1.6
            + (rng.uniform(-0.15, 0.15, 3) if (out.std(-1).mean() < 0.05) else 0)
        )
        return np.clip(out, 0, 1) * 255
    if op == "brighten":
        for _ in range(2):
            f = 1 - (1 - f) * (1 - f)
        return f * 255
    if op == "darken":
        return f * f * f * 255
    if op == "blur":
        n = max(7, img.shape[0] // 12)
        k = np.zeros((n, n), np.float32)
        k[n // 2, :] = 1
        R = cv2.getRotationMatrix2D((n / 2 - 0.5, n / 2 - 0.5), float(rng.uniform(0, 180)), 1.0)
        k = cv2.warpAffine(k, R, (n, n))
        return cv2.filter2D(img.astype(np.float32), -1, k / k.sum(), borderType=cv2.BORDER_REFLECT)
    raise ValueError(op)


DL_ASKED = 16.0  # the mean |ΔL*| a brighten / darken asks for (README.md)


def delta_lstar(img: np.ndarray, new: np.ndarray, m: np.ndarray) -> float:
    """Mean |ΔL*| via scikit-image's CIE Lab over the blob's core (mask > 0.5)."""
    from skimage.color import rgb2lab

    core = m > 0.5
    if not core.any():
        return 0.0
    la = rgb2lab(img.astype(np.float64) / 255)[..., 0]
    lb = rgb2lab(np.clip(new, 0, 255) / 255)[..., 0]
    return float(np.abs(lb - la)[core].mean())


def jpeg420(img: np.ndarray, q: int) -> np.ndarray:
    ok, buf = cv2.imencode(
        ".jpg",
        img[..., ::-1],
        [
            cv2.IMWRITE_JPEG_QUALITY,
            q,
            cv2.IMWRITE_JPEG_SAMPLING_FACTOR,
            cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420,
        ],
    )
    return cv2.imdecode(buf, cv2.IMREAD_COLOR)[..., ::-1].copy()


def damage(
    img: np.ndarray, box: list[float], band: str, rng: np.random.Generator
) -> tuple[np.ndarray, dict[str, Any]]:
    how = str(rng.choice(["jpeg", "shot", "offset"]))
    strong = band == "blatant"
    if how == "jpeg":
        q = int(rng.integers(3, 8) if strong else rng.integers(8, 15))
        return jpeg420(img, q), {"artefact": how, "quality": q}
    if how == "shot":
        peak = float(rng.uniform(0.6, 1.2) if strong else rng.uniform(1.2, 2.4))
        out = rng.poisson(img.astype(np.float64) * peak) / peak
        return np.clip(out, 0, 255).astype(np.uint8), {"artefact": how, "peak": round(peak, 2)}
    off = rng.uniform(16, 28) if strong else rng.uniform(10, 16)
    vec = np.array([off, -off / 2, -off / 2])[rng.permutation(3)]
    out = img.astype(np.float32) + vec
    h, w = img.shape[:2]
    out[int(box[1] * h) : int(np.ceil(box[3] * h)), int(box[0] * w) : int(np.ceil(box[2] * w))] = (
        img[int(box[1] * h) : int(np.ceil(box[3] * h)), int(box[0] * w) : int(np.ceil(box[2] * w))]
    )
    return np.clip(out, 0, 255).astype(np.uint8), {"artefact": how, "offset": round(float(off), 1)}


def random_box(rng: np.random.Generator) -> list[float]:
    a = rng.uniform(0.05, 0.16)
    r = rng.uniform(0.6, 1.6)
    bw, bh = min(0.6, float(np.sqrt(a * r))), min(0.6, float(np.sqrt(a / r)))
    x, y = rng.uniform(0, 1 - bw), rng.uniform(0, 1 - bh)
    return [round(x, 4), round(y, 4), round(x + bw, 4), round(y + bh, 4)]


def changes_visibly(img: np.ndarray, op: str, box: list[float], donors: list[np.ndarray]) -> bool:
    rng = np.random.default_rng(3)
    m = blob(img.shape, box, 1.0, rng)
    new = transform(img, op, box, m, donors, rng)
    if op in ("brighten", "darken") and delta_lstar(img, new, m) < DL_ASKED * 1.1:
        return False
    d = np.abs(new - img.astype(np.float32)).mean(2)
    return bool((m > 0.5).any()) and float(d[m > 0.5].mean()) > 12


def away_from(box: list[float], rng: np.random.Generator) -> list[float] | None:
    bw, bh = box[2] - box[0], box[3] - box[1]
    for _ in range(80):
        x, y = rng.uniform(0, 1 - bw), rng.uniform(0, 1 - bh)
        gap = max(x - box[2], box[0] - (x + bw), y - box[3], box[1] - (y + bh))
        if gap > 0.06:  # clear of the target on at least one axis
            return [x, y, x + bw, y + bh]
    return None


def make_set(seed: int, n: int = 230, size: int = 192) -> list[Case]:
    rng = np.random.default_rng(30_000 + seed)
    lib = library(size, rng)
    tot = sum(COUNTS.values())
    plan = [f for f, k in COUNTS.items() for _ in range(round(k * n / tot))][:n]
    rng.shuffle(plan)
    out = []
    for row, fault in enumerate(plan):
        j = int(rng.integers(len(lib)))
        img, donors = lib[j], lib[:j] + lib[j + 1 :]
        op = str(rng.choice(list(KINDS)))
        for _ in range(10):
            box = random_box(rng)
            if changes_visibly(img, op, box, donors):
                break
        else:
            continue
        band = "full" if fault == "good" else ("blatant" if rng.random() < 0.5 else "subtle")
        mix, part, where = rng.uniform(0.8, 1.0), rng.uniform(0.85, 1.0), box
        note: dict[str, Any] = {"image": j}
        if fault == "missing":
            mix = 0.0 if band == "blatant" else rng.uniform(0.02, 0.05)
        elif fault == "partial":
            if rng.random() < 0.5:
                mix = rng.uniform(0.15, 0.25) if band == "blatant" else rng.uniform(0.25, 0.4)
                note["partial"] = "weak"
            else:
                part = rng.uniform(0.1, 0.25) if band == "blatant" else rng.uniform(0.25, 0.4)
                note["partial"] = "small"
        elif fault == "off_target":
            where = away_from(box, rng)
            if where is None:
                continue
            if band == "subtle":
                mix = rng.uniform(0.55, 0.8)
        m = blob(img.shape, where, part, rng)
        new = transform(img, op, where, m, donors, rng) if mix > 0 else img.astype(np.float32)
        if op in ("brighten", "darken") and mix > 0:
            # tone truth is absolute (bench/editors/README.md): mix set by the ΔL* it yields
            top = delta_lstar(img, new, m)
            if top < DL_ASKED and fault != "off_target":
                continue  # not showable at the requested magnitude: not asked
            k = DL_ASKED / max(top, 1e-3)
            if fault == "missing":
                mix = rng.uniform(0.02, 0.05) * k
            elif note.get("partial") == "weak":
                mix = (
                    rng.uniform(0.15, 0.25) if band == "blatant" else rng.uniform(0.25, 0.35)
                ) * k
            elif fault == "off_target" and band == "subtle":
                mix = min(1.0, mix * max(1.0, k))
            else:
                mix = max(mix, min(1.0, k))
        elif op in ("brighten", "darken"):
            top = delta_lstar(img, transform(img, op, where, m, donors, rng), m)
            if top < DL_ASKED:
                continue
        a = (m * mix)[..., None]
        fake = np.clip(img * (1 - a) + new * a, 0, 255).round().astype(np.uint8)
        if fault == "artefact":
            fake, d = damage(fake, box, band, rng)
            note.update(d)
        elif rng.random() < 0.5:
            q = int(rng.integers(85, 96))
            fake = jpeg420(fake, q)
            note["reencoded"] = q
        note.update(mix=round(float(mix), 3), part=round(float(part), 3))
        listing = {
            "row": row,
            "instruction": ASK[op].format(t="selected object"),
            "kind": KINDS[op],
            "target": "selected object",
            "bbox": box,
            "generator": NAME,
        }
        out.append(Case(img, fake, listing, fault, band, op, note))
    return out
