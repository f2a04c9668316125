"""The models under evaluation that the benchmark families share: a detector (offline forensic
detector, a VLM through an ``llm:`` pool, or a predictions file), configured once and used by
the evaluation, reward (``detector`` policies) and FakeBench families."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from forenset.backends.llm.types import LLMSettings
from forenset.confbase import Strict


class DetectorConfig(Strict):
    """One detector under evaluation (one row per eval item per detector per track).

    ``offline``: forensic features + a scikit-learn classifier trained on the train split
    (``forenset.benchmarks.common``); ``vlm``: a model pool prompted with the paper's detection
    prompts (App. 16.0.0.2); ``file``: predictions of the user's own model, JSONL or CSV with
    ``sample_id, answer, explanation[, simple_explanation]``."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")
    kind: Literal["offline", "vlm", "file"] = "offline"
    classifier: Literal["logreg", "hgb"] = "logreg"  # offline
    train_per_class: int = Field(2000, ge=1)  # offline: seeded draw per label from the train split
    llm: LLMSettings | None = None  # vlm
    max_attempts: int = Field(1, ge=1, le=10)  # vlm: an unparseable answer is a wrong prediction
    path: str | None = None  # file

    @model_validator(mode="after")
    def _kind(self) -> DetectorConfig:
        if self.kind == "vlm" and self.llm is None:
            raise ValueError(f"detector {self.name}: kind 'vlm' needs an 'llm:' pool")
        if self.kind == "file" and not self.path:
            raise ValueError(f"detector {self.name}: kind 'file' needs 'path:'")
        return self
