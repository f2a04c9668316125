"""Surrogate encoder specs, checked without importing torch (the config reads them)."""

from __future__ import annotations

from pathlib import Path

KINDS = ("tiny_conv", "tiny_vit", "hf", "open_clip_dir", "open_clip", "timm")
LOCAL_KINDS = ("hf", "open_clip_dir")  # specs whose argument is a local folder


def check_encoder_spec(spec: str) -> None:
    """Refuse a spec that cannot load when the config is read, not in the middle of a build."""
    kind, _, arg = spec.partition(":")
    if kind not in KINDS:
        raise ValueError(
            f"unknown encoder spec {spec!r}: use tiny_conv:SEED, tiny_vit:SEED, hf:PATH, "
            "open_clip_dir:PATH, open_clip:MODEL/PRETRAINED or timm:NAME"
        )
    if kind in LOCAL_KINDS and not Path(arg).is_dir():
        raise ValueError(f"surrogate encoder {spec!r}: {arg!r} is not a local folder")
