"""Image quality of a perturbed image against its clean source (scikit-image metrics)."""

from __future__ import annotations

import numpy as np

PSNR_CAP = 100.0  # identical images: PSNR is infinite; capped so means stay finite


def quality(clean: np.ndarray, perturbed: np.ndarray) -> dict[str, float]:
    """PSNR (dB, capped at 100) and SSIM (channel-averaged) on uint8 RGB images."""
    if clean.shape != perturbed.shape:
        raise ValueError(f"shape mismatch {clean.shape} vs {perturbed.shape}")
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity  # scipy.stats: slow

    if np.array_equal(clean, perturbed):
        return {"psnr": PSNR_CAP, "ssim": 1.0}
    psnr = float(peak_signal_noise_ratio(clean, perturbed, data_range=255))
    win = min(7, min(clean.shape[:2]) // 2 * 2 - 1)
    ssim = float(
        structural_similarity(clean, perturbed, channel_axis=2, data_range=255, win_size=win)
    )
    return {"psnr": min(psnr, PSNR_CAP), "ssim": ssim}


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
