"""Image-API generators inside a build: edits and text-to-image against the loopback fakes."""

import pytest

from forenset.config import validate_config
from forenset.flows.local import run_local
from forenset.testing.fake_gemini import FakeGemini
from forenset.testing.fake_openai import FakeOpenAI
from tests.conftest import small_config_dict
from tests.helpers import rows


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_api_generator_edits_and_generates(tmp_path, monkeypatch, kind):
    monkeypatch.setenv("IMG_KEY", "sk-test-generator-key")
    Fake = FakeOpenAI if kind == "openai" else FakeGemini
    with Fake() as server:
        backend = {"openai": {"backend": "openai"}, "gemini": {"backend": "gemini"}}[kind]
        gen = {
            "name": f"{kind}-img",
            **backend,
            "family": "api",
            "t2i_size": [64, 64],
            kind: {"base_url": server.base_url, "api_key_env": "IMG_KEY", "max_retries": 1},
        }
        cfg = validate_config(
            small_config_dict(
                tmp_path / "run",
                generators=[gen],
                sources={"samples": ["coffee", "rocket"], "max_side": 64},
                scenarios={"per_category": 1, "categories": ["P1", "I2"]},
            )
        )
        store, stats, _ = run_local(cfg)
    cands = rows(store, "candidates")
    assert cands and all(r["status"] == "ok" and r["backend"] == kind for r in cands), [
        r["error"] for r in cands
    ]
    kinds = {r["kind"] for r in cands}
    assert "t2i" in kinds and kinds - {"t2i"}, kinds
    assert len([r for r in cands if r["kind"] == "t2i"]) == len(rows(store, "prompts")) == 2
    assert "sk-test-generator-key" not in str(cands)
