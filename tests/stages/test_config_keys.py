"""The model-stage config keys: examples validate, bad pool entries fail in one sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from forenset.config import ConfigError, load_config, validate_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"  # the default config is in the package


def test_api_example_switches_every_model_stage():
    cfg = load_config(EXAMPLES / "api.yaml")
    for stage in ("captions", "instructions", "diffs", "judgments", "explanations"):
        spec = getattr(cfg, stage).llm.pool[0]
        assert (spec.backend, spec.base_url, spec.api_key_env) == (
            "openai",
            "http://localhost:8000/v1",
            "OPENAI_API_KEY",
        )
    assert cfg.scenarios.llm is not None and cfg.prompts.llm is not None


def test_demo_is_offline():
    cfg = load_config(None)
    assert all(
        getattr(cfg, s).llm is None
        for s in ("captions", "instructions", "diffs", "judgments", "explanations", "prompts")
    )
    assert cfg.scenarios.enabled and cfg.scenarios.per_category * 12 >= 120


def test_unknown_pool_key_is_one_sentence():
    bad = {"diffs": {"llm": {"pool": [{"backend": "openai", "model": "m", "rmp": 5}]}}}
    with pytest.raises(ConfigError) as e:
        validate_config(bad)
    assert "diffs.llm.pool.0.rmp" in str(e.value) and str(e.value).count(".\n") == 0


def test_max_attempts_bounds():
    with pytest.raises(ConfigError, match="judgments.max_attempts"):
        validate_config({"judgments": {"max_attempts": 0}})
