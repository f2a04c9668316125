"""Preservation fidelity of a candidate: off-target PSNR/SSIM, LPIPS and CLIP-I.

XPlainVerse (Table 2) compares retained and discarded candidates on PSNR, SSIM, LPIPS and CLIP-I
as a *preservation* measure. Over the whole image a missing edit (a near copy) scores best, so
the pixel measures are also taken *outside* the instruction's target box (expanded by the rule
judge's margin): what the edit should have left alone. LPIPS and CLIP-I need models; they load
from local paths only, and without one the value is null with the reason.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from forenset.backends.offline_diff import ssim_map
from forenset.backends.rule_judge import expand

TARGET_MARGIN = 0.06  # the rule judge's margin around the target box


def outside_mask(shape: tuple[int, ...], box: list[float] | None) -> np.ndarray | None:
    """True outside the (expanded) normalised target box; None without a usable box."""
    if not box or len(box) != 4:
        return None
    h, w = shape[:2]
    x0, y0, x1, y1 = expand([float(v) for v in box], TARGET_MARGIN)
    mask = np.ones((h, w), bool)
    mask[
        int(np.floor(y0 * h)) : int(np.ceil(y1 * h)), int(np.floor(x0 * w)) : int(np.ceil(x1 * w))
    ] = False
    return mask


def off_target(
    real: np.ndarray,
    fake: np.ndarray,
    box: list[float] | None,
    smap: tuple[np.ndarray, int] | None = None,
) -> dict[str, Any]:
    """PSNR and SSIM over the pixels outside the target box, or nulls and the reason.
    ``smap``: ``ssim_map(real, fake)`` of same-size images, when the caller already has it."""
    if fake.shape != real.shape:
        fake = cv2.resize(fake, (real.shape[1], real.shape[0]), interpolation=cv2.INTER_AREA)
        smap = None
    mask = outside_mask(real.shape, box)
    if mask is None:
        return {
            "psnr_outside": None,
            "ssim_outside": None,
            "note": "no target box in the instruction",
        }
    if mask.sum() < 64:
        return {
            "psnr_outside": None,
            "ssim_outside": None,
            "note": "the target box covers the image",
        }
    diff = real.astype(np.float64) - fake.astype(np.float64)
    mse = float((diff[mask] ** 2).mean())
    psnr = 99.0 if mse <= 1e-10 else min(99.0, 10 * np.log10(255.0**2 / mse))
    # skimage's full SSIM map on OpenCV filters (diffs' own)
    s, _ = smap if smap is not None else ssim_map(real, fake)
    return {
        "psnr_outside": float(psnr),
        "ssim_outside": float(s.mean(axis=2)[mask].mean()),
        "note": None,
    }


@functools.lru_cache(maxsize=4)
def _lpips(path: str, device: str) -> Any:
    import torch

    return torch.jit.load(path, map_location=device).eval()


def lpips(
    real: np.ndarray, fake: np.ndarray, model: str | None, device: str = "cpu"
) -> tuple[float | None, str | None]:
    """LPIPS from a TorchScript export of an LPIPS network (``torch.jit.save`` of a module taking
    two Bx3xHxW images in [-1, 1] and returning distances); (None, reason) without one."""
    if not model:
        return None, "LPIPS: no model configured (diffs.lpips_model: a local TorchScript file)"
    import torch

    net = _lpips(model, device)

    def t(a: np.ndarray) -> torch.Tensor:
        return (
            torch.from_numpy(a.astype(np.float32) / 127.5 - 1.0).permute(2, 0, 1)[None].to(device)
        )

    if fake.shape != real.shape:
        fake = cv2.resize(fake, (real.shape[1], real.shape[0]), interpolation=cv2.INTER_AREA)
    with torch.no_grad():
        return float(net(t(real), t(fake)).flatten()[0]), None


def clip_i(
    real: np.ndarray, fake: np.ndarray, encoder: str | None, device: str = "cpu"
) -> tuple[float | None, str | None]:
    """CLIP-I: cosine similarity of the two images' embeddings from an image encoder in a local
    folder (``hf:PATH``: a CLIP model's projected image embedding when it has one); (None,
    reason) without one."""
    if not encoder:
        return None, "CLIP-I: no encoder configured (diffs.clip_encoder: hf:PATH)"
    import torch
    import torch.nn.functional as F

    from forenset.perturbations.attacks import load_encoder

    enc = load_encoder(encoder, device)
    x = (
        torch.from_numpy(np.stack([real, fake]).astype(np.float32) / 255.0)
        .permute(0, 3, 1, 2)
        .to(device)
    )
    with torch.no_grad():
        embed = getattr(enc, "embed", None)
        g = embed(x) if callable(embed) else enc.encode(x)[0]
    return float(F.cosine_similarity(g[:1], g[1:]).item()), None


def check_local(path: str | None, what: str) -> None:
    """A configured model path must exist when the config is read."""
    if path and not Path(path.split(":", 1)[1] if path.startswith("hf:") else path).exists():
        raise ValueError(f"{what}: {path!r} does not exist")
