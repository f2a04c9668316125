"""SLE simplicity of simple explanations, normalised as in the seed paper (App. 15.0.0.5).

SLE (Cripwell et al.) is a regression model whose raw output estimates how simple a text is;
higher is simpler. The paper clips the raw score to [-1, 4] (eq. 7) and maps it to [0, 1]
(eq. 8) so that it is bounded and comparable across models:

    SLE_clip = min(4, max(-1, SLE_raw))        SLE_norm = (SLE_clip + 1) / 5

The regressor is loaded from a local folder (a sequence-classification model with one label);
without one the score is null with the reason, never a made-up number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from forenset.benchmarks.common.scorers.encoders import (
    LocalModelScorer,
    max_tokens,
    transformers_names,
)
from forenset.benchmarks.common.scorers.types import Score, null_score
from forenset.errors import ConfigurationError

METRIC = "sle"
BACKEND = "transformers"
NO_MODEL = "no SLE model configured"
SLE_MIN, SLE_MAX = -1.0, 4.0


def sle_clip(raw: float) -> float:
    """Eq. 7: the raw SLE score clipped to [-1, 4]; NaN is refused (it has no place in a mean)."""
    if math.isnan(raw):
        raise ValueError("SLE raw score is NaN")
    return min(SLE_MAX, max(SLE_MIN, float(raw)))


def sle_normalise(raw: float) -> float:
    """Eq. 8: (SLE_clip + 1) / 5, in [0, 1]; higher is simpler."""
    return (sle_clip(raw) + 1.0) / 5.0


class SleScorer(LocalModelScorer):
    """SLE over a local regression model (``num_labels=1``); ``None`` gives null scores."""

    what = "SLE"

    def _load_model(self, path: Path) -> Any:
        (AutoModelForSequenceClassification,) = transformers_names(
            "AutoModelForSequenceClassification"
        )

        model = AutoModelForSequenceClassification.from_pretrained(str(path), local_files_only=True)
        if int(model.config.num_labels) != 1:
            raise ConfigurationError(
                f"SLE model {self.model_label!r} has {model.config.num_labels} labels; "
                "a regression model has one"
            )
        return model

    def raw(self, texts: Sequence[str]) -> list[float]:
        """Raw SLE regression outputs, ``batch_size`` texts per forward pass."""
        self._load()
        limit = max_tokens(self._tok, self._model)
        out: list[float] = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = [t.strip() for t in texts[start : start + self.batch_size]]
                enc = self._tok(
                    batch, padding=True, truncation=True, max_length=limit, return_tensors="pt"
                )
                logits = self._model(**{k: v.to(self.device) for k, v in enc.items()}).logits
                out.extend(float(x) for x in logits[:, 0].float().cpu())
        return out

    def score(self, texts: Sequence[str]) -> list[Score]:
        """Normalised SLE per text (eq. 7–8); the raw value is in ``details["raw"]``."""
        if self.path is None:
            return [null_score(METRIC, NO_MODEL, backend=BACKEND) for _ in texts]
        if not texts:
            return []
        out = []
        for raw in self.raw(texts):
            if math.isnan(raw):
                out.append(
                    null_score(
                        METRIC, "SLE model returned NaN", model=self.model_label, backend=BACKEND
                    )
                )
            else:
                value = sle_normalise(raw)
                out.append(Score(METRIC, value, self.model_label, BACKEND, details={"raw": raw}))
        return out
