"""Image quality of a perturbed image against its clean source (scikit-image metrics)."""

from __future__ import annotations

import numpy as np
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

PSNR_CAP = 100.0  # identical images: PSNR is infinite; capped so means stay finite


def quality(clean: np.ndarray, perturbed: np.ndarray) -> dict[str, float]:
    """PSNR (dB, capped at 100) and SSIM (channel-averaged) on uint8 RGB images."""
    if clean.shape != perturbed.shape:
        raise ValueError(f"shape mismatch {clean.shape} vs {perturbed.shape}")
    if np.array_equal(clean, perturbed):
        return {"psnr": PSNR_CAP, "ssim": 1.0}
    psnr = float(peak_signal_noise_ratio(clean, perturbed, data_range=255))
    win = min(7, min(clean.shape[:2]) // 2 * 2 - 1)
    ssim = float(
        structural_similarity(clean, perturbed, channel_axis=2, data_range=255, win_size=win)
    )
    return {"psnr": min(psnr, PSNR_CAP), "ssim": ssim}
