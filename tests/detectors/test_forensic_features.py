"""Forensic features on real pixels: finite, deterministic, and the map points at a local edit."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import skimage.data

from forenset.benchmarks.common import forensic


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    return np.ascontiguousarray(skimage.data.astronaut()[:192, 160:352])


def test_features_are_finite_named_and_deterministic(photo):
    a, b = forensic.features(photo), forensic.features(photo.copy())
    assert a.shape == (len(forensic.FEATURE_NAMES),) and len(set(forensic.FEATURE_NAMES)) == a.size
    assert np.isfinite(a).all()
    assert np.array_equal(a, b)  # bit-identical: a stage may cache or fingerprint them


def test_flat_grey_and_greyscale_images_stay_finite():
    flat = np.full((64, 64, 3), 128, np.uint8)
    grey = np.stack([skimage.data.camera()[:96, :96]] * 3, -1)
    for img in (flat, grey):
        assert np.isfinite(forensic.features(img)).all()


@pytest.mark.parametrize(
    "bad", [np.zeros((16, 16, 3), np.uint8), np.zeros((64, 64, 3), np.float32), np.zeros(5)]
)
def test_unusable_inputs_are_refused_with_a_reason(bad):
    with pytest.raises(ValueError):
        forensic.features(bad)


def test_features_react_to_a_local_blur(photo):
    """A blurred square lowers its blocks' noise and sharpness z-scores below the rest."""
    fake = photo.copy()
    fake[96:160, 96:160] = cv2.GaussianBlur(photo[96:160, 96:160], (0, 0), 2.0)
    m = forensic.inconsistency_map(fake)
    inside = np.zeros(m.score.shape, bool)
    inside[6:10, 6:10] = True  # 16-px blocks of the square
    for name, margin in (("noise", 1.5), ("sharpness", 0.5)):
        assert m.z[name][inside].mean() < m.z[name][~inside].mean() - margin, name
    assert not np.array_equal(forensic.features(fake), forensic.features(photo))
