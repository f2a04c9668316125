"""Fixtures: loopback fakes talked to by the real SDKs, sentinel keys, fresh limiters."""

from __future__ import annotations

import pytest

from forenset.backends.llm import reset_limiters
from forenset.testing.fake_gemini import FakeGemini
from forenset.testing.fake_openai import FakeOpenAI
from tests.imageapi.imageapi_kit import GEMINI_SENTINEL, OPENAI_SENTINEL


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
    """Ports are reused between tests: one test's learned pauses must not pace another."""
    reset_limiters()


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("IMG_OPENAI_KEY", OPENAI_SENTINEL)
    monkeypatch.setenv("IMG_GEMINI_KEY", GEMINI_SENTINEL)
