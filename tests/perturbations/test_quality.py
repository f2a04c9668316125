"""quality() and the per-split degradation ordering."""

from __future__ import annotations

import numpy as np

from forenset.perturbations import quality
from forenset.perturbations.photos import photos
from forenset.perturbations.quality import summarize_splits
from forenset.seeds import rng_for


def test_quality_identical_and_noisy(small_img: np.ndarray) -> None:
    assert quality(small_img, small_img) == {"psnr": 100.0, "ssim": 1.0}
    rng = rng_for("q")
    mild = np.clip(small_img + rng.normal(0, 3, small_img.shape), 0, 255).astype(np.uint8)
    hard = np.clip(small_img + rng.normal(0, 30, small_img.shape), 0, 255).astype(np.uint8)
    qm, qh = quality(small_img, mild), quality(small_img, hard)
    assert 30 < qm["psnr"] < 60 and qh["psnr"] < qm["psnr"]
    assert qh["ssim"] < qm["ssim"] < 1.0


def test_degradation_increases_train_validation_test() -> None:
    """On a sample of real photos, mean quality falls strictly train > validation > test."""
    res = summarize_splits(photos(64)[:3], seeds_per_image=30, build_seed=0)
    assert res["train"]["psnr"] > res["validation"]["psnr"] > res["test"]["psnr"]
    assert res["train"]["ssim"] > res["validation"]["ssim"] > res["test"]["ssim"]
