"""SLE normalisation (seed paper App. 15.0.0.5, eq. 7-8) and a tiny saved regression model."""

from __future__ import annotations

import math

import pytest
import torch
from scorer_kit import save_regressor
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from forenset.benchmarks.common.scorers.sle import NO_MODEL, SleScorer, sle_clip, sle_normalise
from forenset.errors import ConfigurationError


@pytest.mark.parametrize(
    "raw, clipped, norm",
    [
        (-5.0, -1.0, 0.0),
        (-1.0, -1.0, 0.0),
        (0.0, 0.0, 0.2),
        (1.5, 1.5, 0.5),
        (4.0, 4.0, 1.0),
        (10.0, 4.0, 1.0),
        (math.inf, 4.0, 1.0),
        (-math.inf, -1.0, 0.0),
    ],
)
def test_normalisation_edges(raw, clipped, norm):
    assert sle_clip(raw) == clipped
    assert sle_normalise(raw) == pytest.approx(norm)


def test_nan_is_refused():
    with pytest.raises(ValueError, match="NaN"):
        sle_normalise(math.nan)


TEXTS = ["The hands look blurry.", "the sign text is warped and the shadow is wrong", "fine"]


def test_round_trip_of_a_saved_regression_model(regressor_dir):
    scores = SleScorer(regressor_dir, batch_size=2).score(TEXTS)
    tok = AutoTokenizer.from_pretrained(str(regressor_dir), local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(
        str(regressor_dir), local_files_only=True
    ).eval()
    for s, text in zip(scores, TEXTS, strict=True):
        with torch.no_grad():
            raw = float(model(**tok(text, return_tensors="pt")).logits[0, 0])
        assert s.details["raw"] == pytest.approx(raw, abs=1e-5)  # batched == one by one
        assert s.value == pytest.approx(sle_normalise(raw), abs=1e-6)
        assert (s.metric, s.model, s.backend) == ("sle", str(regressor_dir), "transformers")


@pytest.mark.parametrize("bias, want", [(-5.0, 0.0), (0.0, 0.2), (10.0, 1.0)])
def test_clipping_applies_to_model_outputs(tmp_path, bias, want):
    folder = save_regressor(tmp_path / "fixed", bias=bias)  # output == bias for every text
    [s] = SleScorer(folder).score(["The hands look blurry."])
    assert s.details["raw"] == pytest.approx(bias) and s.value == pytest.approx(want)


def test_not_configured_and_wrong_models(tmp_path):
    assert [(s.value, s.reason) for s in SleScorer(None).score(TEXTS[:2])] == [(None, NO_MODEL)] * 2
    with pytest.raises(ConfigurationError, match="not a local folder"):
        SleScorer(tmp_path / "nope")
    two = save_regressor(tmp_path / "two", num_labels=2)
    with pytest.raises(ConfigurationError, match="2 labels"):
        SleScorer(two).score(TEXTS[:1])
