"""Fixtures of the model-layer tests; helpers live in llm_kit.py."""

import fsspec
import pytest
from llm_kit import *  # noqa: F403
from llm_kit import GEMINI_SENTINEL, SENTINEL_KEY, _stage_ids  # noqa: F401

from forenset.backends.llm import ResponseCache, reset_limiters
from forenset.testing.fake_gemini import FakeGemini
from forenset.testing.fake_openai import FakeOpenAI


@pytest.fixture
def openai_server():
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def gemini_server():
    with FakeGemini() as server:
        yield server


@pytest.fixture(autouse=True)
def fresh_limiters():
    """Ports get reused between tests: never let one test's learned limits pace another."""
    reset_limiters()


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("FAKE_OPENAI_KEY", SENTINEL_KEY)
    monkeypatch.setenv("FAKE_GEMINI_KEY", GEMINI_SENTINEL)


@pytest.fixture
def cache(tmp_path):
    return ResponseCache(fsspec.filesystem("file"), str(tmp_path / "run"))


@pytest.fixture
def stage():
    """A fresh stage name per test: stage guards are process-wide per (stage, seed)."""
    return f"stage{next(_stage_ids)}"
