"""Standalone propagation levels and the propagation ops."""

from __future__ import annotations

import numpy as np
import pytest

from forenset.perturbations import REGISTRY, propagate, quality
from forenset.perturbations.photos import photo
from forenset.seeds import rng_for


def test_level_zero_is_identity(small_img: np.ndarray) -> None:
    out = propagate(small_img, 0, rng_for("p0"))
    assert np.array_equal(out, small_img) and out is not small_img


def test_levels_degrade_progressively() -> None:
    img = photo("astronaut", 128)
    psnr = {lvl: [] for lvl in (1, 2, 3)}
    for k in range(5):
        for lvl in psnr:
            out = propagate(img, lvl, rng_for("prop", k))
            assert out.shape == img.shape and out.dtype == np.uint8
            psnr[lvl].append(quality(img, out)["psnr"])
    means = [np.mean(psnr[lvl]) for lvl in (1, 2, 3)]
    assert means[0] > means[1] > means[2]


def test_negative_level_rejected(small_img: np.ndarray) -> None:
    with pytest.raises(ValueError):
        propagate(small_img, -1, rng_for("n"))


def test_propagation_ops_match_levels(small_img: np.ndarray) -> None:
    p = {"scale": 0.7, "quality": 70, "sharpen": 0.3}
    outs = [REGISTRY[f"propagation_{k}x"].apply(small_img, p, rng_for("x")) for k in (1, 2, 3)]
    q = [quality(small_img, o)["psnr"] for o in outs]
    assert q[0] > q[2]


def test_social_chain_rejects_unknown_platform() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        REGISTRY["social_chain"].params_model(length=1, platforms=["myspace"])
