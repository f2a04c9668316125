"""PerturbationConfig: mixture probabilities, chunk sizes, severity bands, adversarial settings."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .registry import SPLITS

SsimMode = Literal["wang", "skimage"]  # see forenset/perturbations/quality.py


class SplitSchedule(BaseModel):
    """How one split mixes ops: P(single), P(pair), P(chunk), chunk size range, severity band."""

    model_config = ConfigDict(extra="forbid")

    single: float = Field(ge=0, le=1)
    pair: float = Field(ge=0, le=1)
    chunk: float = Field(ge=0, le=1)
    chunk_min: int = Field(ge=1)
    chunk_max: int = Field(ge=1)
    severity: tuple[float, float] = Field(description="band in [0,1]: 0 = easy end, 1 = hard end")

    @model_validator(mode="after")
    def _check(self) -> SplitSchedule:
        total = self.single + self.pair + self.chunk
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"single + pair + chunk must be 1, got {total}")
        if self.chunk_min > self.chunk_max:
            raise ValueError("chunk_min > chunk_max")
        lo, hi = self.severity
        if not 0.0 <= lo <= hi <= 1.0:
            raise ValueError(f"severity band must satisfy 0 <= lo <= hi <= 1, got {self.severity}")
        return self


class AdversarialConfig(BaseModel):
    """Adversarial ops. Defaults run offline on tiny random-init encoders (a real build names
    open_clip/timm encoders and a trained UAP file)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    # surrogate encoder specs (attacks.load_encoder): tiny_conv:SEED / tiny_vit:SEED (random
    # init), hf:PATH (a transformers image model in a local folder), open_clip_dir:PATH, ...
    encoders: list[str] = Field(default_factory=lambda: ["tiny_conv:0", "tiny_vit:1"])
    # per attack: None = ``encoders`` (for a stored UAP: the surrogates it was trained against)
    uap_encoders: list[str] | None = None
    foa_encoders: list[str] | None = None
    pgd_encoders: list[str] | None = None
    device: str = "auto"  # "auto" = cuda when available
    uap_path: str | None = None  # .npy/.pt; None = train a small one in-process (cached)
    uap_size: int = 64
    uap_steps: int = 30
    uap_seed: int = 0
    # L-inf radii in 0..255 units, per split (each image draws uniformly in its split's range)
    uap_eps: dict[str, tuple[float, float]] = Field(
        default_factory=lambda: {"train": (2.0, 4.0), "validation": (4.0, 8.0), "test": (8.0, 12.0)}
    )
    foa_eps: dict[str, tuple[float, float]] = Field(
        default_factory=lambda: {"validation": (4.0, 8.0), "test": (8.0, 16.0)}
    )
    foa_steps: int = 8
    foa_step_size: float = 1.0
    foa_clusters: int = 10
    foa_ot_weight: float = 0.2
    foa_crop_min: float = 0.7
    pgd_eps: dict[str, tuple[float, float]] = Field(default_factory=lambda: {"test": (8.0, 16.0)})
    pgd_steps: int = 10
    pgd_step_size: float = 2.0

    def surrogates(self, attack: str) -> list[str]:
        """The encoder specs one attack (uap | foa | pgd) runs against."""
        own = getattr(self, f"{attack}_encoders")
        return list(own if own is not None else self.encoders)

    @model_validator(mode="after")
    def _encoders_load(self) -> AdversarialConfig:
        from .encoder_specs import check_encoder_spec

        for spec in {
            *self.encoders,
            *(self.uap_encoders or []),
            *(self.foa_encoders or []),
            *(self.pgd_encoders or []),
        }:
            check_encoder_spec(spec)
        return self


def _default(split: str) -> SplitSchedule:
    table = {
        "train": (0.85, 0.10, 0.05, 6, 8, (0.0, 0.4)),
        "validation": (0.75, 0.15, 0.10, 8, 12, (0.3, 0.7)),
        "test": (0.70, 0.20, 0.10, 13, 17, (0.6, 1.0)),
    }
    s, p, c, lo, hi, band = table[split]
    return SplitSchedule(single=s, pair=p, chunk=c, chunk_min=lo, chunk_max=hi, severity=band)


class PerturbationConfig(BaseModel):
    """Everything the perturbation stage needs; all fields defaulted. Part of the stage
    fingerprint: changing it changes which images are produced."""

    model_config = ConfigDict(extra="forbid")

    train: SplitSchedule = Field(default_factory=lambda: _default("train"))
    validation: SplitSchedule = Field(default_factory=lambda: _default("validation"))
    test: SplitSchedule = Field(default_factory=lambda: _default("test"))
    include: list[str] | None = None  # only these ops (still subject to first_split)
    exclude: list[str] = Field(default_factory=list)
    exclude_families: list[str] = Field(default_factory=list)
    adversarial: AdversarialConfig = Field(default_factory=AdversarialConfig)
    single_thread: bool = True  # cv2/torch one thread while perturbing: bit-identical output
    # SSIM of each perturbed image vs its clean one: "wang" = the reference ssim.m recipe (luma,
    # downsampled to ~256 px, Gaussian window); "skimage" = per RGB channel at full size (quality.py)
    ssim: SsimMode = "wang"

    def schedule(self, split: str) -> SplitSchedule:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
        return getattr(self, split)

    @model_validator(mode="after")
    def _known_ops(self) -> PerturbationConfig:
        from .registry import FAMILIES, REGISTRY

        names = list(self.include or []) + list(self.exclude)
        unknown = sorted(n for n in names if n not in REGISTRY)
        if unknown:
            raise ValueError(f"unknown ops {unknown}")
        bad = sorted(f for f in self.exclude_families if f not in FAMILIES)
        if bad:
            raise ValueError(f"unknown families {bad}")
        return self
