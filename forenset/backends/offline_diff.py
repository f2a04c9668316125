"""Pixel-level difference extraction: the offline Edit-Check stage 1 and the grounding reference.

Signed difference -> low/high frequency split -> changed mask (smoothed |Δ| over a threshold,
or local SSIM drop) -> connected regions -> bbox, area, magnitude, change type, salience 1–5.
Widespread high-frequency difference outside the regions is reported as an artefact entry.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from forenset.backends.offline_vision import position_name


def _gaussian_kernel(sigma: float, truncate: float = 3.5) -> np.ndarray:
    """scipy.ndimage's 1-D Gaussian (radius ``int(truncate * sigma + 0.5)``), as skimage uses."""
    r = int(truncate * sigma + 0.5)
    x = np.arange(-r, r + 1, dtype=np.float64)
    k = np.exp(-0.5 * (x / sigma) ** 2)
    return k / k.sum()


def ssim_map(
    a: np.ndarray, b: np.ndarray, *, data_range: float = 255.0, sigma: float | None = None
) -> tuple[np.ndarray, int]:
    """SSIM map of two images (each channel on its own) and its window's half size.

    The algorithm of ``skimage.metrics.structural_similarity`` (K1 0.01, K2 0.03, sample
    covariance; a 7×7 uniform window, or Gaussian weights of ``sigma`` truncated at 3.5 σ; scipy's
    'reflect' border, which is OpenCV's BORDER_REFLECT) with OpenCV's filters in float64 instead
    of scipy.ndimage, all channels in one call: the same numbers to ~1e-12
    (tests/stages/test_diffs_ssim.py) and 3-5× faster; diffs spent most of its time there."""
    x, y = a.astype(np.float64), b.astype(np.float64)
    if sigma is None:
        win = 7

        def filt(img: np.ndarray) -> np.ndarray:
            return cv2.boxFilter(img, -1, (win, win), normalize=True, borderType=cv2.BORDER_REFLECT)

    else:
        k = _gaussian_kernel(sigma)
        win = k.size

        def filt(img: np.ndarray) -> np.ndarray:
            return cv2.sepFilter2D(img, cv2.CV_64F, k, k, borderType=cv2.BORDER_REFLECT)

    ux, uy = filt(x), filt(y)
    uxx, uyy, uxy = filt(x * x), filt(y * y), filt(x * y)
    cov_norm = win * win / (win * win - 1)
    vx, vy, vxy = cov_norm * (uxx - ux * ux), cov_norm * (uyy - uy * uy), cov_norm * (uxy - ux * uy)
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
    return s, (win - 1) // 2


def ssim(
    a: np.ndarray,
    b: np.ndarray,
    *,
    data_range: float = 255.0,
    smap: tuple[np.ndarray, int] | None = None,
) -> float:
    """Mean SSIM, channels averaged: ``structural_similarity(a, b, channel_axis=2)``'s value.
    ``smap``: ``ssim_map(a, b)`` when the caller already has it (diffs uses it twice)."""
    s, pad = smap if smap is not None else ssim_map(a, b, data_range=data_range)
    inner = s[pad : s.shape[0] - pad, pad : s.shape[1] - pad]
    if inner.ndim == 2:
        return float(inner.mean(dtype=np.float64))
    return float(np.mean([inner[..., c].mean(dtype=np.float64) for c in range(inner.shape[2])]))


def psnr(a: np.ndarray, b: np.ndarray, data_range: float = 255.0) -> float:
    """``skimage.metrics.peak_signal_noise_ratio`` (inf for identical images)."""
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(data_range**2 / mse)


def fidelity(
    a: np.ndarray, b: np.ndarray, smap: tuple[np.ndarray, int] | None = None
) -> tuple[float, float]:
    """PSNR and SSIM between real and candidate (the XPlainVerse Table 2 fidelity columns).
    ``smap``: ``ssim_map(a, b)`` of same-size images, when the caller already has it."""
    if a.shape != b.shape:
        b = cv2.resize(b, (a.shape[1], a.shape[0]), interpolation=cv2.INTER_AREA)
        smap = None
    p = psnr(a, b)
    return (min(p, 99.0) if np.isfinite(p) else 99.0), ssim(a, b, smap=smap)


def salience(area: float, magnitude: float) -> int:
    """1–5 from how much of the image changed and how strongly (magnitude in 0..1)."""
    score = np.sqrt(area) * 4 + magnitude * 3
    return int(np.clip(np.digitize(score, [0.35, 0.7, 1.1, 1.6]) + 1, 1, 5))


def pixel_differences(
    real: np.ndarray,
    fake: np.ndarray,
    *,
    threshold: float = 0.08,
    min_region_frac: float = 0.0015,
    max_regions: int = 8,
) -> dict[str, Any]:
    if real.shape != fake.shape:
        fake = cv2.resize(fake, (real.shape[1], real.shape[0]), interpolation=cv2.INTER_AREA)
    h, w = real.shape[:2]
    a, b = real.astype(np.float32), fake.astype(np.float32)
    s = b - a
    sigma = max(2.0, min(h, w) / 48)
    low = cv2.GaussianBlur(s, (0, 0), sigma)
    high = s - low
    mag = np.abs(cv2.GaussianBlur(s, (0, 0), 1.5)).max(axis=2) / 255.0
    ga, gb = cv2.cvtColor(real, cv2.COLOR_RGB2GRAY), cv2.cvtColor(fake, cv2.COLOR_RGB2GRAY)
    smap, _ = ssim_map(ga, gb, sigma=2.0)
    changed = (mag > threshold) | ((1 - smap) > 0.5)
    k = max(3, int(min(h, w) / 64) | 1)
    m = cv2.morphologyEx(changed.astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    m = cv2.morphologyEx(m, cv2.MORPH_CLOSE, np.ones((k, k), np.uint8))
    n, labels, stats, _ = cv2.connectedComponentsWithStats(m, connectivity=8)
    regs: list[dict[str, Any]] = []
    lum_a, lum_b = ga.astype(np.float32), gb.astype(np.float32)
    for i in range(1, n):
        x, y, bw, bh, cnt = stats[i]
        frac = cnt / (h * w)
        if frac < min_region_frac:
            continue
        sel = labels == i
        dl = float(np.abs(lum_b[sel] - lum_a[sel]).mean()) / 255
        dc = float(np.abs(s[sel] - s[sel].mean(axis=1, keepdims=True)).mean()) / 255
        ds = float((1 - smap[sel]).mean())
        if dc > dl * 0.8 and ds < 0.35:
            ctype = "colour change"
        elif ds < 0.2 and dl > 0.02:
            ctype = "brightness change"
        else:
            ctype = "content change"
        magn = float(mag[sel].mean())
        box = [x / w, y / h, (x + bw) / w, (y + bh) / h]
        regs.append(
            {
                "bbox": [round(v, 4) for v in box],
                "area": round(float(frac), 5),
                "magnitude": round(magn, 4),
                "change_type": ctype,
                "structure": round(ds, 4),
            }
        )
    regs.sort(key=lambda r: -(r["area"] * (0.2 + r["magnitude"])))
    regs = regs[:max_regions]
    outside = ~(m.astype(bool))
    hf = float(np.abs(high).mean(axis=2)[outside].mean()) / 255 if outside.any() else 0.0
    tone = float(np.abs(low).mean()) / 255
    diffs = []
    for j, r in enumerate(regs):
        cx, cy = (r["bbox"][0] + r["bbox"][2]) / 2, (r["bbox"][1] + r["bbox"][3]) / 2
        where = "whole image" if r["area"] > 0.5 else f"{position_name(cx, cy)}"
        diffs.append(
            {
                "id": f"d{j + 1}",
                "region": where,
                "change_type": r["change_type"],
                "description": (
                    f"{r['change_type']} over {r['area'] * 100:.1f}% of the image at the {where}, "
                    f"mean intensity change {r['magnitude'] * 100:.0f}%"
                ),
                "salience": salience(r["area"], r["magnitude"]),
                "bbox": r["bbox"],
                "area": r["area"],
                "magnitude": r["magnitude"],
            }
        )
    if hf > 0.02:
        diffs.append(
            {
                "id": f"d{len(diffs) + 1}",
                "region": "whole image",
                "change_type": "artifact",
                "description": f"widespread high-frequency noise or blocking, mean {hf * 100:.1f}% per pixel",
                "salience": int(np.clip(round(hf * 100 / 1.5), 1, 5)),
                "bbox": [0.0, 0.0, 1.0, 1.0],
                "area": 1.0,
                "magnitude": round(hf, 4),
            }
        )
    return {
        "differences": diffs,
        "changed_frac": float(m.mean()),
        "artifact_level": hf,
        "tone_shift": tone,
        "mask": m,
    }


def ground(
    differences: list[dict[str, Any]],
    mask: np.ndarray,
    *,
    min_changed: float = 0.05,
    missed_min_area: float = 0.01,
) -> dict[str, Any]:
    """Cross-check listed differences against the pixel-change mask.

    A listed difference is *hallucinated* when under ``min_changed`` of its box changed; a
    connected pixel change of at least ``missed_min_area`` of the image is *missed* when no
    listed box covers it. Artefact entries (whole-image) are not checked against the mask.
    """
    h, w = mask.shape
    m = mask.astype(bool)
    halluc = []
    covered = np.zeros_like(m)
    for d in differences:
        if d.get("change_type") == "artifact" or not d.get("bbox"):
            continue
        x0, y0 = int(d["bbox"][0] * w), int(d["bbox"][1] * h)
        x1, y1 = (
            max(x0 + 1, int(np.ceil(d["bbox"][2] * w))),
            max(y0 + 1, int(np.ceil(d["bbox"][3] * h))),
        )
        if m[y0:y1, x0:x1].mean() < min_changed:
            halluc.append(d.get("id"))
        covered[y0:y1, x0:x1] = True
    n, labels, stats, _ = cv2.connectedComponentsWithStats(m.astype(np.uint8), connectivity=8)
    missed = []
    for i in range(1, n):
        x, y, bw, bh, cnt = stats[i]
        if cnt / (h * w) < missed_min_area:
            continue
        if covered[labels == i].mean() < 0.5:
            missed.append(
                {
                    "bbox": [
                        round(x / w, 4),
                        round(y / h, 4),
                        round((x + bw) / w, 4),
                        round((y + bh) / h, 4),
                    ],
                    "area": round(float(cnt / (h * w)), 5),
                }
            )
    listed = [d for d in differences if d.get("change_type") != "artifact"]
    return {
        "hallucinated": halluc,
        "missed": missed,
        "hallucination_rate": round(len(halluc) / len(listed), 4) if listed else 0.0,
    }
