"""The one result shape every scorer returns: a value or null with the reason, and who computed it.

Score tables mix metrics from several models (an LLM evaluator, a BERTScore encoder, the SLE
regressor); a number without the model that produced it cannot be compared across runs, and a
missing model must never turn into a made-up number. So each result carries ``model`` (a local
path or a pool label) and ``backend``, and ``value is None`` always comes with a ``reason``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Score:
    """One metric value for one item (or group), traced to the model that computed it."""

    metric: str
    value: float | None
    model: str
    backend: str
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.value is None and not self.reason:
            raise ValueError(f"{self.metric}: a null score needs a reason")
        if self.value is not None and not math.isfinite(self.value):
            raise ValueError(f"{self.metric}: score {self.value!r} is not finite")

    @property
    def ok(self) -> bool:
        return self.value is not None

    def row(self) -> dict[str, Any]:
        """Flat columns for a stage row: ``<metric>``, ``<metric>_model``, ... (details as is)."""
        m = self.metric
        return {
            m: self.value,
            f"{m}_model": self.model,
            f"{m}_backend": self.backend,
            f"{m}_reason": self.reason,
            **{f"{m}_{k}": v for k, v in self.details.items()},
        }


def null_score(metric: str, reason: str, *, model: str = "", backend: str = "") -> Score:
    """A metric that could not be computed, with the sentence saying why."""
    return Score(metric=metric, value=None, model=model, backend=backend, reason=reason)
