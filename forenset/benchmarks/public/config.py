"""The ``public:`` section: which public benchmarks to import (each from its folder on disk),
which models answer them, and the model-based explanation metrics' models."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from forenset.benchmarks.common.responders import ResponderConfig, responder_list_item
from forenset.benchmarks.common.scoring.intervals import IntervalsConfig
from forenset.confbase import Strict, operational, repeated

Benchmark = Literal["fakeclue", "loki", "sofake_ood", "aigi_holmes"]
Task = Literal["judgement", "multiple_choice", "explanation"]
TEMPLATE = "public_question"


class PublicBenchmark(Strict):
    """One release on disk: ``path`` is the folder in the release's own layout
    (docs/public-benchmarks.md); ``annotations`` names the annotation file where it is not at
    the release's place; ``tasks`` keeps some task types; ``limit`` caps the records read per
    annotation file (in file order)."""

    name: Benchmark
    path: str
    annotations: str | None = None
    tasks: list[Task] | None = None
    limit: int | None = Field(None, ge=1)


# One model under evaluation (its rows' ``answerer``): ``llm`` (a model pool, the images
# attached; the default), ``constant`` (every image judged ``answer``, the first option chosen,
# no clue named: the floor), ``file`` (replies written elsewhere, JSONL/CSV keyed by item_id:
# cached replies of any model) or a plugin's kind.
if TYPE_CHECKING:
    PublicModel = ResponderConfig
else:
    PublicModel = responder_list_item("public", "llm", {"constant": {"answer": "fake"}})


class PublicConfig(Strict):
    """The ``public:`` section, shared by the three stages. Off by default."""

    enabled: bool = False
    benchmarks: list[PublicBenchmark] = []
    models: list[PublicModel] = []
    bertscore_model: str | None = None  # local encoder folder; None: bertscore_f1 is null
    similarity_model: str | None = None  # local sentence encoder folder; None: null
    intervals: IntervalsConfig = IntervalsConfig()
    prompts_dir: str | None = operational(None)

    @field_validator("benchmarks")
    @classmethod
    def _one_each(cls, v: list[PublicBenchmark]) -> list[PublicBenchmark]:
        names = [b.name for b in v]
        dup = repeated(names)
        if dup:
            raise ValueError(f"public benchmarks must be listed once each; {dup} repeated")
        return v

    @field_validator("models")
    @classmethod
    def _unique(cls, v: list[Any]) -> list[Any]:
        names = [m.name for m in v]
        dup = repeated(names)
        if dup:
            raise ValueError(f"public model names must be unique; {dup} repeated")
        return v
