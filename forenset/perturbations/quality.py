"""Image quality of a perturbed image against its clean source: PSNR and SSIM as scikit-image
defines them, computed with OpenCV (they run once per perturbed image, so speed matters)."""

from __future__ import annotations

import numpy as np

PSNR_CAP = 100.0  # identical images: PSNR is infinite; capped so means stay finite


def quality(clean: np.ndarray, perturbed: np.ndarray) -> dict[str, float]:
    """PSNR (dB, capped at 100) and SSIM (channel-averaged) on uint8 RGB images."""
    if clean.shape != perturbed.shape:
        raise ValueError(f"shape mismatch {clean.shape} vs {perturbed.shape}")
    if np.array_equal(clean, perturbed):
        return {"psnr": PSNR_CAP, "ssim": 1.0}
    import cv2

    mse = cv2.norm(clean, perturbed, cv2.NORM_L2SQR) / clean.size  # exact, double accumulator
    psnr = 10 * np.log10(255.0**2 / mse) if mse > 0 else PSNR_CAP
    win = min(7, min(clean.shape[:2]) // 2 * 2 - 1)
    return {"psnr": float(min(psnr, PSNR_CAP)), "ssim": fast_ssim(clean, perturbed, win)}


def fast_ssim(a: np.ndarray, b: np.ndarray, win: int = 7) -> float:
    """skimage's ``structural_similarity`` (uniform window, sample covariance, data range 255,
    channel-averaged, borders cropped) with OpenCV box filters in float32, one channel at a
    time so the temporaries stay in cache: ~1.8x faster than the float64 version this replaced
    and ~8x faster than skimage; within 1e-6 of skimage (``tests/perturbations/test_quality.py``).
    Second moments are taken about 128, which leaves variances unchanged and keeps float32's
    cancellation error far below the constant C2."""
    import cv2

    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    n = win * win
    cov_norm = n / (n - 1)
    pad = (win - 1) // 2
    crop = (slice(pad, -pad or None), slice(pad, -pad or None))

    def box(z: np.ndarray) -> np.ndarray:
        return cv2.boxFilter(z, -1, (win, win), normalize=True, borderType=cv2.BORDER_REFLECT)[crop]

    a3 = a if a.ndim == 3 else a[..., None]
    b3 = b if b.ndim == 3 else b[..., None]
    vals = []
    for ch in range(a3.shape[2]):
        x = a3[..., ch].astype(np.float32)
        y = b3[..., ch].astype(np.float32)
        ux, uy = box(x), box(y)
        x -= 128.0
        y -= 128.0
        exx, eyy, exy = box(x * x), box(y * y), box(x * y)
        uxc, uyc = ux - 128.0, uy - 128.0
        vx = exx - uxc * uxc
        vy = eyy - uyc * uyc
        vxy = exy - uxc * uyc
        num = (2 * ux * uy + c1) * (2 * cov_norm * vxy + c2)
        den = (ux * ux + uy * uy + c1) * (cov_norm * (vx + vy) + c2)
        vals.append(float(np.mean(num / den, dtype=np.float64)))
    return float(np.mean(vals))


def summarize_splits(
    images: list[np.ndarray],
    config: object | None = None,
    *,
    seeds_per_image: int = 4,
    build_seed: int = 0,
) -> dict[str, dict[str, float]]:
    """Mean PSNR/SSIM per split over ``images`` x ``seeds_per_image`` perturbations.

    Seeds follow the stage convention: ``derive_seed(build_seed, split, image index, k)``.
    Degradation should increase train -> validation -> test.
    """
    from ..seeds import derive_seed
    from .config import PerturbationConfig
    from .mixture import perturb_image
    from .registry import SPLITS

    cfg = config if isinstance(config, PerturbationConfig) else PerturbationConfig()
    out: dict[str, dict[str, float]] = {}
    for split in SPLITS:
        ps, ss = [], []
        for i, img in enumerate(images):
            for k in range(seeds_per_image):
                seed = derive_seed(build_seed, split, i, k)
                pert, _ = perturb_image(img, split=split, seed=seed, config=cfg)
                q = quality(img, pert)
                ps.append(q["psnr"])
                ss.append(q["ssim"])
        out[split] = {"psnr": float(np.mean(ps)), "ssim": float(np.mean(ss)), "n": len(ps)}
    return out
