"""Preservation fidelity: off-target PSNR/SSIM, LPIPS and CLIP-I from local models (or null)."""

from __future__ import annotations

import numpy as np
import pytest
import skimage.data

from forenset.backends.fidelity import clip_i, lpips, off_target


@pytest.fixture(scope="module")
def photo():
    import cv2

    return cv2.resize(skimage.data.astronaut(), (96, 96), interpolation=cv2.INTER_AREA)


def test_off_target_ignores_the_edit_and_sees_spill(photo):
    box = [0.5, 0.5, 0.9, 0.9]
    inside = photo.copy()
    inside[50:85, 50:85] = 255 - inside[50:85, 50:85]  # the edit, inside its box
    spill = inside.copy()
    spill[5:30, 5:30] = 0  # an off-target change
    a, b = off_target(photo, inside, box), off_target(photo, spill, box)
    assert a["psnr_outside"] == 99.0 and a["ssim_outside"] > 0.999 and a["note"] is None
    assert b["psnr_outside"] < 30 and b["ssim_outside"] < a["ssim_outside"]
    none = off_target(photo, inside, None)
    assert none["psnr_outside"] is None and "no target box" in none["note"]
    full = off_target(photo, inside, [0.0, 0.0, 1.0, 1.0])
    assert full["psnr_outside"] is None and "covers the image" in full["note"]


def test_model_measures_are_null_with_a_reason_without_a_model(photo):
    assert lpips(photo, photo, None)[0] is None and "LPIPS" in lpips(photo, photo, None)[1]
    assert clip_i(photo, photo, None)[0] is None and "CLIP-I" in clip_i(photo, photo, None)[1]


def test_clip_i_and_lpips_from_local_files(photo, tmp_path):
    """Tiny random-init models saved locally: plumbing and the measures' basic properties (a
    real build names a real CLIP folder and an LPIPS export)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.CLIPConfig(
        text_config={
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "vocab_size": 64,
        },
        vision_config={
            "image_size": 32,
            "patch_size": 8,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
        },
        projection_dim=16,
    )
    torch.manual_seed(0)
    transformers.CLIPModel(cfg).save_pretrained(tmp_path / "clip")
    spec = f"hf:{tmp_path / 'clip'}"
    same, why = clip_i(photo, photo.copy(), spec)
    assert why is None and same == pytest.approx(1.0, abs=1e-5)
    other, _ = clip_i(photo, np.ascontiguousarray(photo[::-1]), spec)
    assert other < same

    class L1(torch.nn.Module):  # stands in for an exported LPIPS network
        def forward(self, a, b):
            return (a - b).abs().mean(dim=(1, 2, 3))

    path = tmp_path / "lpips.pt"
    torch.jit.save(torch.jit.script(L1()), str(path))
    assert lpips(photo, photo, str(path)) == (0.0, None)
    d, _ = lpips(photo, 255 - photo, str(path))
    assert d > 0.1


def test_diffs_config_refuses_missing_model_paths():
    from forenset.tasks.diffs import DiffsConfig

    with pytest.raises(ValueError, match="not a local folder"):
        DiffsConfig(clip_encoder="hf:/no/such/clip")
    with pytest.raises(ValueError, match="does not exist"):
        DiffsConfig(lpips_model="/no/such/lpips.pt")
