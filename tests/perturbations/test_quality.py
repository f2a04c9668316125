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


def test_quality_matches_scikit_image(small_img: np.ndarray) -> None:
    """The OpenCV/float32 PSNR and SSIM equal skimage's on real photos, small and odd sizes,
    grey images, and on heavy and light degradations."""
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    from forenset.perturbations.quality import fast_ssim

    rng = rng_for("q-ref")
    cases = [photos(96)[1], photos(64)[2][:37, :50], small_img]
    for img in cases:
        for sigma in (2, 25, 90):
            noisy = np.clip(img + rng.normal(0, sigma, img.shape), 0, 255).astype(np.uint8)
            q = quality(img, noisy)
            assert abs(q["psnr"] - peak_signal_noise_ratio(img, noisy, data_range=255)) < 1e-9
            ref = structural_similarity(img, noisy, channel_axis=2, data_range=255)
            assert abs(q["ssim"] - ref) < 1e-6, (img.shape, sigma, q["ssim"], ref)
    grey, noisy = cases[0][..., 0], np.clip(cases[0][..., 0] + 40.0, 0, 255).astype(np.uint8)
    assert abs(fast_ssim(grey, noisy) - structural_similarity(grey, noisy, data_range=255)) < 1e-6
