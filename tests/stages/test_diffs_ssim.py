"""diffs computes SSIM with OpenCV filters: the numbers of scikit-image's reference, to 1e-9."""

from __future__ import annotations

import numpy as np
import pytest
import skimage.data
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from forenset.backends.offline_diff import fidelity, psnr, ssim, ssim_map


def _pair(h: int, w: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    real = skimage.data.astronaut()[:h, :w]
    fake = real.copy()
    fake[h // 4 : h // 2, w // 3 : w // 2] = 255 - fake[h // 4 : h // 2, w // 3 : w // 2]
    noise = rng.integers(-6, 7, fake.shape)
    return real, np.clip(fake.astype(np.int16) + noise, 0, 255).astype(np.uint8)


@pytest.mark.parametrize(("h", "w"), [(16, 23), (97, 64), (300, 257)])
def test_ssim_matches_scikit_image(h, w):
    real, fake = _pair(h, w, h)
    ref = structural_similarity(real, fake, channel_axis=2, data_range=255)
    assert ssim(real, fake) == pytest.approx(ref, abs=1e-9)
    ga, gb = real[..., 0], fake[..., 1]
    _, ref_map = structural_similarity(
        ga, gb, full=True, data_range=255, gaussian_weights=True, sigma=2.0
    )
    smap, pad = ssim_map(ga, gb, sigma=2.0)
    assert pad == 7 and smap.shape == ref_map.shape
    assert np.abs(smap - ref_map).max() < 1e-9
    assert psnr(real, fake) == pytest.approx(peak_signal_noise_ratio(real, fake, data_range=255))


def test_fidelity_of_identical_images_is_capped():
    real, _ = _pair(32, 32, 0)
    assert fidelity(real, real) == (99.0, pytest.approx(1.0))


def test_a_shared_ssim_map_gives_the_same_fidelity_and_off_target_values():
    """diffs computes the RGB SSIM map once for fidelity and off_target; sharing it must not
    change either value, and a map of another size (a resized candidate) is not used."""
    from forenset.backends.fidelity import off_target

    real, fake = _pair(120, 150, 3)
    smap = ssim_map(real, fake)
    box = [0.3, 0.2, 0.5, 0.5]
    assert fidelity(real, fake, smap) == fidelity(real, fake)
    assert off_target(real, fake, box, smap) == off_target(real, fake, box)
    assert off_target(real, fake, box)["ssim_outside"] != fidelity(real, fake)[1]
    small = fake[:60, :75]  # resized inside: the given map no longer applies
    assert fidelity(real, small, smap) == fidelity(real, small)
    assert off_target(real, small, box, smap) == off_target(real, small, box)
