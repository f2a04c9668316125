"""The ``fakebench:`` section: the FakeBench family's config model (items, evaluated models,
judge), read by its three stages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from forenset.backends.llm.types import LLMSettings
from forenset.benchmarks.common.responders import ResponderConfig, responder_list_item
from forenset.benchmarks.common.scoring.intervals import IntervalsConfig
from forenset.confbase import Strict, operational, repeated

AUTHOR_TEMPLATE = "fakebench_fault_finding"
ANSWER_TEMPLATES = ("fakebench_question", "fakebench_inference")
SHARD = "items"
OFFLINE_MODEL = "diff-clues-v1"


class OfficialRelease(Strict):
    """FakeBench's official release as the item source (``fakebench.official``): the folder
    holding ``FakeClass.json``, ``FakeClue.json`` and ``FakeQA.json`` (or their ``Evaluation/``
    folder, the repository's layout) and the image folder (the images by ``image_id``, directly
    or under ``fake_images`` / ``real_images``). ``forenset fakebench-export --official`` writes
    the same layout."""

    queries: str
    images: str


# One model under evaluation (its rows' ``answerer``): a responder (``common.responders``) of kind
# ``llm`` (the default: a model pool), ``constant`` (an offline reference that judges every image
# ``belief`` and names no clue: the floor a model must beat; the paper's models that call
# everything real score like ``belief: real``), ``detector`` (the evaluation family's offline
# forensic detector, trained on ``train_per_class`` images per label of the train split as
# ``detections`` trains it, answering from what it measured), ``official`` (a model's replies
# in the official release's answer files: ``answers``, the folder with ``test_FakeClass.json``,
# ``test_FakeClue.json``, ``test_FakeQA.json``, so any model run with the release's scripts is
# scored here) or a plugin's kind.
class OfficialResponder(ResponderConfig):
    """A model's replies in FakeBench's official answer files (``answers``: the folder with
    ``test_FakeClass.json``, ``test_FakeClue.json``, ``test_FakeQA.json``); FakeBench's own
    responder kind (``Family.responders``)."""

    kind: Literal["official"] = "official"
    answers: str


if TYPE_CHECKING:
    FakeBenchModel = ResponderConfig
else:
    FakeBenchModel = responder_list_item("fakebench", "llm", {"constant": {"answer": "fake"}})


class FakeBenchConfig(Strict):
    """The ``fakebench:`` section, shared by the three FakeBench stages. Off by default."""

    enabled: bool = False
    split: Literal["train", "validation", "test"] = "test"
    fakes: int = Field(3000, ge=1)  # FakeBench: 3,000 fake and 3,000 real images
    reals: int = Field(3000, ge=0)
    clues_per_image: int = Field(5, ge=1, le=14)  # "each fake image is assigned five clues"
    # FakeClue's evaluation modes: inference (reasoning: CoT, then the verdict) and
    # fault_finding (interpretation: "This is a fake image, explain why.", zero-shot)
    clue_modes: list[Literal["inference", "fault_finding"]] = ["inference"]
    author: LLMSettings | None = None  # fault-finding golden-clue writer; None: offline clues
    max_attempts: int = Field(3, ge=1, le=10)
    clue_edits: str | None = None  # Label Studio JSON export of the FakeClue editing task
    models: list[FakeBenchModel] = []  # evaluated models (fakebench_answers)
    judge: LLMSettings | None = None  # Completeness / Preciseness / Relevance; None: null
    judge_rounds: int = Field(5, ge=1, le=20)
    similarity_model: str | None = None  # local sentence encoder folder; None: null
    official: OfficialRelease | None = None  # items from the official release, not the run
    intervals: IntervalsConfig = IntervalsConfig()  # bootstrap resamples, level, seed, min_n
    prompts_dir: str | None = operational(None)

    @field_validator("clue_modes")
    @classmethod
    def _modes(cls, v: list[str]) -> list[str]:
        if not v or len(set(v)) != len(v):
            raise ValueError("clue_modes needs inference and/or fault_finding, each once")
        return v

    @field_validator("models")
    @classmethod
    def _unique(cls, v: list[Any]) -> list[Any]:
        names = [m.name for m in v]
        dup = repeated(names)
        if dup:
            raise ValueError(f"fakebench model names must be unique; {dup} repeated")
        return v

    @model_validator(mode="after")
    def _detector_split(self) -> FakeBenchConfig:
        """A detector model is trained on the train split: asked about the same images, it
        would be scored on what it was fitted to."""
        det = [m.name for m in self.models if m.kind == "detector"]
        if det and self.split == "train":
            raise ValueError(
                f"fakebench models {det} are detectors trained on the train split; evaluate "
                "them on split validation or test"
            )
        return self
