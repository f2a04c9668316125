"""The ``reward:`` section: the reward family's config model (policies, judges, labels, Elo),
read by its six stages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from forenset.backends.image.generator import GeneratorConfig
from forenset.backends.llm.types import LLMSettings
from forenset.benchmarks.common.responders import ResponderConfig, make, responder_list_item
from forenset.benchmarks.common.scoring.intervals import IntervalsConfig
from forenset.benchmarks.reward.scorers.metrics import K_DEFAULT
from forenset.confbase import Strict, repeated

REAL = "real"
NAME = r"^[A-Za-z0-9_.\-]+$"


# One policy model answering the policy prompt with ``r = (y, e)``: a responder
# (``common.responders``), kinds ``detector`` (the offline forensic detector; ``grounded: false``
# gives the same verdict with an ungrounded sentence, a weaker explainer), ``constant`` (always
# ``answer`` with a generic sentence: the floor), ``llm`` (a model pool with the paper's prompt),
# ``file`` (written responses, e.g. the human baseline of Table 5: ``sample_id`` = the reward
# image id, ``answer``, ``explanation``) or a plugin's kind.
if TYPE_CHECKING:
    Policy = ResponderConfig
else:
    Policy = responder_list_item("reward", "detector")


class JudgeConfig(Strict):
    """One judge (reward model): ``rules`` (the offline rubric judge) or an ``llm`` pool."""

    name: str = Field(pattern=NAME)
    kind: Literal["rules", "llm"] = "rules"
    llm: LLMSettings | None = None
    bad_below: float = Field(0.45, ge=0, le=1)  # rules: both under -> BothBad
    tie_margin: float = Field(0.08, ge=0, le=1)  # rules: closer -> Tie

    @model_validator(mode="after")
    def _kind(self) -> JudgeConfig:
        if self.kind == "llm" and self.llm is None:
            raise ValueError(f"judge {self.name}: kind 'llm' needs an 'llm:' pool")
        return self


class SimulateConfig(Strict):
    """Simulated annotators (``benchmarks/reward/scorers/rubric.py``: the documented noisy rule)."""

    annotators: int = Field(3, ge=1, le=20)
    noise: float = Field(0.15, ge=0, le=1)
    rush: float = Field(0.1, ge=0, le=1)


class LabelsConfig(Strict):
    """Human labels from a Label Studio JSON export (``path``), else simulated annotators.
    The two are never mixed: with ``path`` set nothing is simulated."""

    path: str | None = None
    min_lead_time_s: float = Field(15.0, ge=0)  # App. B: under fifteen seconds is dropped
    # manual resolutions of tied triplets, by triplet id (the choices of metrics.CHOICES)
    resolutions: dict[str, Literal["First", "Second", "Tie", "BothBad"]] = {}
    simulate: SimulateConfig = SimulateConfig()


class ReleaseConfig(Strict):
    """A XAIGID-RewardBench release folder (its root or ``data/``) as the reward stages' input:
    ``reward_responses``, ``reward_triplets`` and ``reward_labels`` come from its policy files
    and annotation records instead of images, policies and annotators of the build
    (``forenset.benchmarks.reward.release``). ``reward: {release: PATH}`` is short for
    ``{path: PATH}``."""

    path: str
    annotations: str = Field("benchmark_annotations.json", pattern=r"^[^/\\]+\.json$")


class RewardConfig(Strict):
    """The ``reward:`` section, shared by the reward stages. Off by default."""

    enabled: bool = False
    images: int = Field(500, ge=1)  # reals; as many fakes, split over the generators
    image_size: int = Field(512, ge=32)
    generators: list[GeneratorConfig] = []
    policies: list[Policy] = [
        make("reward", "detector", name="forensic-grounded"),
        make("reward", "detector", name="forensic-plain", grounded=False),
        make("reward", "constant", name="always-real", kind="constant"),
    ]
    triplets_per_image: int = Field(3, ge=1)
    judges: list[JudgeConfig] = [JudgeConfig(name="rules")]
    swap: bool = True  # also ask every judge with the two responses exchanged
    labels: LabelsConfig = LabelsConfig()
    elo_k: float = Field(K_DEFAULT, gt=0)
    elo_shuffles: int = Field(100, ge=0)
    intervals: IntervalsConfig = IntervalsConfig()  # bootstrap resamples, level, seed, min_n
    # a release folder as the input of responses, triplets and labels (no images, no policies)
    release: ReleaseConfig | None = None

    @field_validator("release", mode="before")
    @classmethod
    def _release_path(cls, v: Any) -> Any:
        return {"path": v} if isinstance(v, str) else v

    @field_validator("generators", "policies", "judges")
    @classmethod
    def _unique(cls, v: list[Any]) -> list[Any]:
        names = [x.name for x in v]
        dup = repeated(names)
        if dup:
            raise ValueError(f"names must be unique (repeated: {', '.join(dup)})")
        if REAL in names:
            raise ValueError(f"'{REAL}' is reserved for the photos")
        return v

    @model_validator(mode="after")
    def _enough(self) -> RewardConfig:
        if self.release is not None:
            return self._with_release()
        if self.enabled and len(self.policies) < 2:
            raise ValueError("reward needs at least two policies to pair their responses")
        return self

    def _with_release(self) -> RewardConfig:
        """A release brings its own responses and labels: what would make them here is refused
        rather than silently ignored, and so is a judge that needs the images it lacks."""
        own = sorted({"images", "image_size", "generators", "policies", "triplets_per_image"}
                     & self.model_fields_set)  # fmt: skip
        if own:
            raise ValueError(f"reward.release replaces {', '.join(own)}: remove them (the "
                             "release's policy files and annotation records are the input)")  # fmt: skip
        if self.labels.path:
            raise ValueError("reward.release brings its own labels (its annotation records): "
                             "remove reward.labels.path")  # fmt: skip
        if any(j.name == "annotations" for j in self.judges):
            raise ValueError("with reward.release the judge name 'annotations' is taken (the "
                             "release's per-annotation Elo table)")  # fmt: skip
        seeing = [j.name for j in self.judges if j.kind == "llm"]
        if seeing:
            raise ValueError(f"reward.release ships no images, so the llm judge(s) "
                             f"{', '.join(seeing)} cannot see them: use kind rules")  # fmt: skip
        return self
