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


def test_wang_ssim_is_the_reference_recipe() -> None:
    """SSIM "wang" = skimage's Wang-compatible settings on the luma downsampled as ssim.m does
    (factor, symmetric padding, block mean), for even, odd and non-multiple sizes."""
    import cv2
    from skimage.metrics import structural_similarity

    from forenset.perturbations.quality import luma_downsampled

    rng = rng_for("q-wang")
    big = cv2.resize(photos(96)[0], (641, 515))  # factor 2, odd sizes: padded
    for img in (big, big[:383, :600], photos(96)[1], big[:700, :640]):
        f = max(1, int(min(img.shape[:2]) / 256 + 0.5))
        y = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY).astype(np.float64)
        h, w = -(-y.shape[0] // f) * f, -(-y.shape[1] // f) * f
        padded = np.pad(y, ((0, h - y.shape[0]), (0, w - y.shape[1])), mode="symmetric")
        expect = padded.reshape(h // f, f, w // f, f).mean(axis=(1, 3))
        assert np.allclose(luma_downsampled(img), expect, atol=1e-3), img.shape
        for sigma in (3, 40):
            noisy = np.clip(img + rng.normal(0, sigma, img.shape), 0, 255).astype(np.uint8)
            ref = structural_similarity(
                luma_downsampled(img).astype(np.float64),
                luma_downsampled(noisy).astype(np.float64),
                gaussian_weights=True,
                sigma=1.5,
                use_sample_covariance=False,
                data_range=255,
            )
            got = quality(img, noisy)["ssim"]
            assert abs(got - ref) < 1e-5, (img.shape, sigma, got, ref)
    # the factor rounds as MATLAB does: 640/256 = 2.5 -> 3 (Python's round() gives 2)
    assert luma_downsampled(np.zeros((700, 640, 3), np.uint8)).shape == (234, 214)
    assert luma_downsampled(np.zeros((384, 600, 3), np.uint8)).shape == (192, 300)
    assert luma_downsampled(np.zeros((383, 600, 3), np.uint8)).shape == (383, 600)
    assert luma_downsampled(np.zeros((300, 300, 3), np.uint8)).shape == (300, 300)


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
            q = quality(img, noisy, "skimage")
            assert abs(q["psnr"] - peak_signal_noise_ratio(img, noisy, data_range=255)) < 1e-9
            ref = structural_similarity(img, noisy, channel_axis=2, data_range=255)
            assert abs(q["ssim"] - ref) < 1e-6, (img.shape, sigma, q["ssim"], ref)
    grey, noisy = cases[0][..., 0], np.clip(cases[0][..., 0] + 40.0, 0, 255).astype(np.uint8)
    assert abs(fast_ssim(grey, noisy) - structural_similarity(grey, noisy, data_range=255)) < 1e-6
