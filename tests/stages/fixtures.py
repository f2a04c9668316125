"""Fixtures for model-stage tests (imported by the test modules: a conftest.py here would
shadow tests/llm/conftest.py, which its tests import as the module `conftest`)."""

from __future__ import annotations

import base64

import pytest

from forenset.backends.llm import reset_limiters, reset_stage
from forenset.testing import fake_gemini, fake_openai
from forenset.testing.fake_gemini import FakeGemini
from forenset.testing.fake_openai import FakeOpenAI
from tests.stages.scripted import MODEL_STAGES, ScriptedModel

__all__ = ["fresh_guards", "keys", "server"]


@pytest.fixture(autouse=True)
def fresh_guards():
    """Stage error windows and limiters are process-wide: every test starts clean."""
    reset_limiters()
    for seed in range(10):
        for s in (*MODEL_STAGES, "scenarios", "prompts"):
            reset_stage(s, seed)
    yield


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("FAKE_OPENAI_KEY", "sk-test-openai")
    monkeypatch.setenv("FAKE_GEMINI_KEY", "AIza-test-gemini")


def gemini_images(body):
    """google-genai serialises inline bytes as URL-safe base64 (pydantic's bytes mode); the
    fake's own decoder assumes the standard alphabet and fails on '-' / '_' (reported)."""
    return [
        base64.urlsafe_b64decode(p["inlineData"]["data"])
        for p in fake_gemini._parts(body)
        if "inlineData" in p
    ]


@pytest.fixture(params=["openai", "gemini"])
def server(request, monkeypatch):
    """(backend, fake server, scripted model) — every model test runs against both APIs."""
    if request.param == "openai":
        srv, mod = FakeOpenAI(), fake_openai
    else:
        monkeypatch.setattr(fake_gemini, "request_images", gemini_images)
        srv, mod = FakeGemini(), fake_gemini
    model = ScriptedModel(mod)
    srv.reply = model
    with srv:
        yield request.param, srv, model
