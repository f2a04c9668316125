"""Fixtures of the scorer tests: tiny saved models (once per session), the fake OpenAI server."""

import pytest
from scorer_kit import save_encoder, save_regressor

from forenset.backends.llm import reset_limiters
from forenset.testing.fake_openai import FakeOpenAI


@pytest.fixture(scope="session")
def encoder_dir(tmp_path_factory):
    return save_encoder(tmp_path_factory.mktemp("tiny-encoder"))


@pytest.fixture(scope="session")
def regressor_dir(tmp_path_factory):
    return save_regressor(tmp_path_factory.mktemp("tiny-sle"))


@pytest.fixture
def openai_server():
    with FakeOpenAI() as server:
        yield server


@pytest.fixture(autouse=True)
def fresh_limiters():
    reset_limiters()


@pytest.fixture(autouse=True)
def fake_key(monkeypatch):
    monkeypatch.setenv("FAKE_SCORER_KEY", "sk-scorer-test")
