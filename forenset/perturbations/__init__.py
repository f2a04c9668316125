"""Perturbation catalogue, per-split mixture schedules and adversarial variants.

Import is light: no torch (adversarial ops import it lazily) and no albumentations (which
imports torch) until an op that uses it runs.
"""

from __future__ import annotations

from . import (  # noqa: F401  (importing registers the ops)
    adversarial,
    blur,
    compression,
    frequency,
    geometric,
    noise,
    photometric,
    propagation,
    weather,
)
from .config import AdversarialConfig, PerturbationConfig, SplitSchedule
from .mixture import apply_record, op_pool, perturb_image, plan, surrogates
from .propagation import propagate
from .quality import quality
from .registry import FAMILIES, REGISTRY, SPLITS, Op, OpParams

# Bump when any op's pixels or sampling change: part of the perturbation stage fingerprint.
CATALOGUE_VERSION = "2"  # 2: placement per split as XPlainVerse Step 4 / App. 12; pgd

__all__ = [
    "CATALOGUE_VERSION",
    "FAMILIES",
    "REGISTRY",
    "SPLITS",
    "AdversarialConfig",
    "Op",
    "OpParams",
    "PerturbationConfig",
    "SplitSchedule",
    "apply_record",
    "op_pool",
    "perturb_image",
    "plan",
    "propagate",
    "quality",
    "surrogates",
]
