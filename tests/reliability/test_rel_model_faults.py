"""A flaky OpenAI-compatible server behind the captions stage: every row is ok or an error with
a reason, and the next build retries exactly the retryable ones (the rest stays cached)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest

from forenset.backends.llm import reset_limiters, reset_stage
from forenset.config import validate_config
from forenset.testing._base import Fault
from forenset.testing.fake_openai import FakeOpenAI
from tests.conftest import small_config_dict
from tests.helpers import rows, run_local
from tests.stages.scripted import ScriptedModel, llm

SAMPLES = ["astronaut", "camera", "coffee", "chelsea", "rocket", "coins", "china", "flower"]
# one fault kind per photo (by request), the rest answer normally
FAULTS = {
    0: ("http500", Fault(status=500, message="upstream exploded")),
    1: ("http429", Fault(status=429, retry_after_s=0.01, message="slow down")),
    2: ("timeout", Fault(delay_s=1.5)),
    3: ("malformed", Fault(content='{"caption": "a photo of', raw_body=None)),
    4: ("badbody", Fault(raw_body=b"<html>502 Bad Gateway</html>")),
}


@pytest.fixture(autouse=True)
def fresh_guards():
    reset_limiters()
    for seed in range(10):
        reset_stage("captions", seed)
    yield


@pytest.fixture
def flaky(monkeypatch):
    """The fake with a persistent fault per photo while ``broken``; healthy once cleared."""
    monkeypatch.setenv("FAKE_OPENAI_KEY", "sk-test-openai")
    from forenset.testing import fake_openai

    srv = FakeOpenAI(reply=ScriptedModel(fake_openai))
    order: dict[str, int] = {}
    state = {"broken": True}

    def fault_for(body):
        images = fake_openai.request_images(body)
        key = hashlib.sha256(images[0] if images else json.dumps(body).encode()).hexdigest()
        idx = order.setdefault(key, len(order))
        return FAULTS[idx][1] if state["broken"] and idx in FAULTS else None

    srv.fault_for = fault_for
    with srv:
        yield srv, state


def test_faulty_model_server_rows_then_retry(tmp_path, flaky):
    srv, state = flaky
    settings = llm("openai", srv, max_retries=1)
    settings["pool"][0]["timeout_s"] = 0.5
    cfg = validate_config(
        small_config_dict(
            tmp_path / "run",
            shard_size=3,
            sources={"samples": SAMPLES, "max_side": 64},
            generators=[{"name": "cv-a", "family": "classical"}],
            scenarios={"enabled": False},
            captions={"llm": settings, "keep_manifest": False},
        )
    )
    store, stats, _ = run_local(cfg)
    assert not any(s.failures for s in stats.values()), {k: v.failures for k, v in stats.items()}
    caps = rows(store, "captions")
    assert len(caps) == len(SAMPLES)
    for r in caps:
        assert r["status"] in ("ok", "error")
        assert bool(r["error"]) == (r["status"] == "error"), r
    errors = [r for r in caps if r["status"] == "error"]
    retryable = [r for r in errors if r["retryable"]]
    reasons = " | ".join(r["error"] for r in errors)
    assert len(errors) == len(FAULTS), reasons  # every injected fault is an error row, no more
    for needle in ("500", "429", "timeout", "malformed"):
        assert needle in reasons, (needle, reasons)
    assert 3 <= len(retryable) < len(errors), reasons  # 5xx/429/timeouts retry, a bad reply not
    assert stats["captions"].ok == len(SAMPLES) - len(FAULTS)

    # a shard with a retryable row is recomputed; its cached ok replies are not paid again, its
    # failed items (retryable or not: a failed reply is never cached) are asked again
    rerun = [i for i in store.manifest("captions") if i.counts.get("retryable", 0) > 0]
    rerun_ids = {r["image_id"] for i in rerun for r in store.read_shard(i).to_pylist()}
    asked_again = [r for r in errors if r["image_id"] in rerun_ids]
    assert {r["image_id"] for r in retryable} <= rerun_ids

    state["broken"] = False  # the server recovers
    n_before = len(srv.requests)
    store, stats, executed = run_local(cfg)
    caps2 = {r["image_id"]: r for r in rows(store, "captions")}
    assert len(srv.requests) - n_before == len(asked_again)
    assert executed["captions"] == len(rerun)
    for r in asked_again:
        assert caps2[r["image_id"]]["status"] == "ok", caps2[r["image_id"]]
    still = [r for r in caps2.values() if r["status"] == "error"]
    assert {r["image_id"] for r in still} == {r["image_id"] for r in errors} - rerun_ids
    assert not any(r["retryable"] for r in still)
    # the downstream stages now see the recovered photos
    assert {r["image_id"] for r in rows(store, "instructions")} >= {
        r["image_id"] for r in asked_again
    }
    assert Counter(r["status"] for r in caps2.values())["ok"] == len(SAMPLES) - len(still)

    # a third build has nothing left to retry
    n_before = len(srv.requests)
    _, _, executed = run_local(cfg)
    assert executed["captions"] == 0 and len(srv.requests) == n_before
