"""The ``evaluation:`` section: the XPlainVerse evaluation family's config model, read by its
three stages (eval_sets, detections, eval_scores)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from forenset.backends.llm.types import LLMSettings
from forenset.benchmarks.common.responders import ResponderConfig, make, responder_list_item
from forenset.benchmarks.common.scoring.intervals import IntervalsConfig
from forenset.confbase import Strict
from forenset.perturbations.registry import FAMILIES

# One detector under evaluation: a responder (common.responders), the forensic detector by default.
if TYPE_CHECKING:
    Detector = ResponderConfig
else:
    Detector = responder_list_item("evaluation", "detector")

EVAL_SETS = ("id", "ood")
MAX_PROPAGATION = 3


def perturbed_variant(family: str, severity: float) -> str:
    """The variant label of a catalogue perturbation: ("noise", 0.5) -> "noise:0.5"."""
    return f"{family}:{severity:g}"


class EvalPerturbationsConfig(Strict):
    """Perturbed copies of every drawn sample: one op of each family at each severity."""

    families: list[str] = []  # catalogue families (forenset.perturbations.FAMILIES)
    severities: list[float] = [0.2, 0.5, 0.8]  # 0 easy end .. 1 hard end; default: band centres
    include: list[str] | None = None  # only these ops of the families (default: all admitted)

    @field_validator("families")
    @classmethod
    def _families(cls, v: list[str]) -> list[str]:
        bad = [f for f in v if f not in FAMILIES]
        if bad:
            raise ValueError(f"unknown perturbation families {bad}; known: {list(FAMILIES)}")
        if len(set(v)) != len(v):
            raise ValueError("perturbation families must be unique")
        return v

    @field_validator("severities")
    @classmethod
    def _severities(cls, v: list[float]) -> list[float]:
        if not v:
            raise ValueError("severities needs at least one value in [0, 1]")
        bad = [x for x in v if not 0.0 <= x <= 1.0]
        if bad:
            raise ValueError(f"severities must be in [0, 1]; got {bad}")
        if len({perturbed_variant("x", x) for x in v}) != len(v):
            raise ValueError("severities must be unique")
        return sorted(v)

    @field_validator("include")
    @classmethod
    def _ops(cls, v: list[str] | None) -> list[str] | None:
        from forenset.perturbations import REGISTRY

        bad = sorted(n for n in v or [] if n not in REGISTRY)
        if bad:
            raise ValueError(f"unknown perturbation ops {bad}")
        return v


class ScorersConfig(Strict):
    """Explanation metrics. Model-based ones load from a local path; unset, they are null with
    the reason. ``evaluator`` unset: EntityScore/EvidenceScore by the offline phrase matcher."""

    evaluator: LLMSettings | None = None
    bertscore_model: str | None = None
    sle_model: str | None = None
    # "gold": each track against the imported gold references (gold_references table: Label
    # Studio gold explains fakes' complex track; an XDD reference both tracks, reals included)
    references: Literal["dataset", "gold"] = "dataset"


class EvaluationConfig(Strict):
    """The ``evaluation:`` section, shared by the evaluation stages. Off by default."""

    enabled: bool = False
    split: Literal["train", "validation", "test"] = "test"
    fakes: int = Field(10_000, ge=1)  # per set, XPlainVerse App. 16
    reals: int = Field(8_500, ge=0)
    keep_composition: bool = True  # shrink both counts alike when the split is smaller
    tracks: list[Literal["complex", "simple"]] = ["complex", "simple"]
    detectors: list[Detector] = [make("evaluation", "detector", name="forensic")]
    scorers: ScorersConfig = ScorersConfig()
    # bootstrap intervals and the minimum n of every eval_scores value (docs/evaluation.md)
    intervals: IntervalsConfig = IntervalsConfig()
    # re-sharing levels of every drawn sample: 0 = the clean image, 1-3 = propagated copies
    propagation: list[int] = [0]
    # catalogue perturbations of every drawn sample, per family and severity (none by default)
    perturbations: EvalPerturbationsConfig = EvalPerturbationsConfig()

    @field_validator("propagation")
    @classmethod
    def _levels(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("propagation needs at least one level (0 = the clean images)")
        bad = [x for x in v if not 0 <= x <= MAX_PROPAGATION]
        if bad:
            raise ValueError(f"propagation levels must be 0-{MAX_PROPAGATION}; got {bad}")
        dup = sorted({x for x in v if v.count(x) > 1})
        if dup:
            raise ValueError(f"propagation levels must be unique; {dup} repeated")
        return sorted(v)
