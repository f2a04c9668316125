"""A model server that echoes the API key it was sent (issue 32, case 4): the key lands in no
row (content or error column), no cache file, no export and no log line."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from forenset.backends.llm import reset_limiters, reset_stage
from forenset.config import validate_config
from forenset.testing.fake_openai import FakeOpenAI
from tests.conftest import small_config_dict
from tests.helpers import rows, run_local
from tests.stages.scripted import ScriptedModel, llm

KEY = "sk-live-0123456789abcdefSECRET"
SAMPLES = ["astronaut", "coffee", "chelsea", "rocket"]


@pytest.fixture(autouse=True)
def fresh_guards():
    reset_limiters()
    for seed in range(10):
        reset_stage("captions", seed)
    yield


def _echo(value, auth: str):
    """The first string field of a reply with the key appended (a chatty model)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, str) and v:
                return {**value, k: f"{v} (authorised with {auth})"}
        return value
    return f"{value} {auth}"


@pytest.fixture
def echoing(monkeypatch):
    monkeypatch.setenv("FAKE_OPENAI_KEY", KEY)
    import hashlib
    import json

    from forenset.testing import fake_openai

    scripted = ScriptedModel(fake_openai)
    order: dict[str, int] = {}

    def reply(body):
        images = fake_openai.request_images(body)
        h = hashlib.sha256(images[0] if images else json.dumps(body).encode()).hexdigest()
        if order.setdefault(h, len(order)) == 1:  # one photo's replies cannot be parsed, so
            return f"I cannot do that with key {KEY}; <html>"  # the key meets the error column
        return _echo(scripted(body), KEY)

    with FakeOpenAI(reply=reply) as srv:
        yield srv


def _files_with_key(root: Path) -> list[str]:
    return [
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and KEY.encode() in p.read_bytes()
    ]


def test_echoed_key_lands_nowhere(tmp_path, echoing, caplog):
    cfg = validate_config(
        small_config_dict(
            tmp_path / "run",
            sources={"samples": SAMPLES, "max_side": 64},
            generators=[{"name": "cv-a", "family": "classical"}],
            scenarios={"enabled": False},
            evaluation={"enabled": False},
            fakebench={"enabled": False},
            captions={"llm": llm("openai", echoing), "keep_manifest": False},
        )
    )
    with caplog.at_level(logging.INFO):
        store, stats, _ = run_local(cfg)
        # a transformers-style truncation warning that prints the prompt (and so the key)
        logging.getLogger("transformers.tokenization_utils_base").warning(
            "The following part of your input was truncated because CLIP can only handle "
            "sequences up to 77 tokens: ['use %s to sign in']",
            KEY,
        )
    caps = rows(store, "captions")
    assert any(r["status"] == "ok" for r in caps)
    assert any(r["status"] == "error" for r in caps)  # the unreadable reply
    assert any("***" in (r.get("caption") or "") for r in caps)  # the echo was there, redacted
    for stage in ("captions", "instructions", "explanations"):
        for r in rows(store, stage):
            assert KEY not in repr(r), (stage, r)
    from forenset.exports.api import run_export
    from forenset.exports.settings import ExportSettings

    run_export(store, "hf", None, ExportSettings())
    root = Path(store.root)
    assert (root / "cache").exists() and list((root / "cache").rglob("*.json"))
    assert _files_with_key(root) == []
    assert KEY not in caplog.text
    assert "use " not in caplog.text and "text encoder's limit" in caplog.text


def test_redaction_covers_key_shapes_and_tables():
    import pyarrow as pa

    from forenset.redact import redact, redact_table, remember

    remember("custom-secret-value-42")
    t = pa.table({"a": ["ok", "x custom-secret-value-42 y", None], "n": [1, 2, 3]})
    assert redact_table(t).column("a").to_pylist() == ["ok", "x *** y", None]
    for token in ("sk-proj-abcdef123456", "AIzaSyA-abcdefghijkl", "hf_" + "a" * 30,
                  "ghp_" + "b" * 36, "AKIAABCDEFGHIJKLMNOP", "Bearer abc.def-ghi_jkl9"):  # fmt: skip
        assert redact(f"key: {token}.") in ("key: ***.", "key: ***"), token
    for text in ("a risk-averse skeleton", "the flag bearer responsibilities"):
        assert redact(text) == text
