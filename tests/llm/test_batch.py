"""Batch mode (OpenAI Batch API, Gemini inlined batches) against the fakes.

Submit once, poll on restart, resubmit only missing ids on expiry, repair online.
"""

from __future__ import annotations

import json

import pytest
from llm_kit import Caption, gemini_spec, openai_spec, settings

from forenset.backends.llm import BatchLedger, ChatRequest, run_chat
from forenset.testing.fake_gemini import FakeGemini
from forenset.testing.fake_openai import FakeOpenAI

PROVIDERS = ["openai", "gemini"]


def reqs(n: int) -> list[ChatRequest]:
    return [
        ChatRequest(
            task="judge",
            item_id=f"b{i}",
            system="s",
            user=f"judge pair {i}",
            response_model=Caption,
        )
        for i in range(n)
    ]


def make_server(provider: str, **kw):
    return (FakeOpenAI if provider == "openai" else FakeGemini)(**kw)


def batch_spec(provider: str, server, **kw):
    make = openai_spec if provider == "openai" else gemini_spec
    return make(
        server, batch=True, batch_poll_s=0.01, price_in_per_mtok=2.0, price_out_per_mtok=4.0, **kw
    )


def input_ids(provider: str, server, batch_id: str) -> list[str]:
    if provider == "gemini":
        return [r["metadata"]["key"] for r in server.batches[batch_id]["requests"]]
    data = server.files[server.batches[batch_id].obj["input_file_id"]]["data"]
    return [json.loads(x)["custom_id"] for x in data.decode().splitlines()]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_batch_submit_poll_collect(provider, cache, stage):
    with make_server(provider, batch_polls_to_complete=3) as server:
        spec = batch_spec(provider, server)
        out = run_chat(reqs(6), settings(spec), build_seed=1, stage=stage, cache=cache)
        assert all(r.status == "ok" for r in out), [r.error for r in out]
        assert [f"pair {i}" in r.parsed.caption for i, r in enumerate(out)] == [True] * 6
        [bid] = server.batches
        assert sorted(input_ids(provider, server, bid)) == [f"b{i}" for i in range(6)]
        assert all(r.batch_id == bid and r.backend == provider for r in out)
        r = out[0]
        assert r.cost_usd == pytest.approx(
            (r.input_tokens * 2.0 + r.output_tokens * 4.0) / 1e6 * 0.5
        )
        assert not server.requests  # nothing went through the online endpoint
        events = [e["event"] for e in BatchLedger(cache.fs, cache.root).events()]
        assert events == ["submitted", "status", "collected"]
        again = run_chat(reqs(6), settings(spec), build_seed=1, stage=stage, cache=cache)
        assert all(r.cached for r in again) and len(server.batches) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_restart_polls_the_existing_batch(provider, cache, stage):
    with make_server(provider, batch_polls_to_complete=4) as server:
        s = settings(batch_spec(provider, server, batch_wait_s=0.0))
        first = run_chat(reqs(4), s, build_seed=1, stage=stage, cache=cache)
        assert all(r.status == "error" and r.retryable for r in first)
        assert "not finished" in first[0].error
        [bid] = server.batches
        s2 = settings(batch_spec(provider, server))  # a restart with patience
        second = run_chat(reqs(4), s2, build_seed=1, stage=stage, cache=cache)
        assert list(server.batches) == [bid]  # polled, not resubmitted
        assert all(r.status == "ok" and r.batch_id == bid for r in second)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_expired_batch_resubmits_only_missing_ids(provider, cache, stage):
    with make_server(provider, batch_expire_after=3) as server:
        out = run_chat(
            reqs(5), settings(batch_spec(provider, server)), build_seed=1, stage=stage, cache=cache
        )
        assert all(r.status == "ok" for r in out)
        first, second = server.batches
        sent_first = input_ids(provider, server, first)
        assert len(sent_first) == 5
        assert sorted(input_ids(provider, server, second)) == sorted(sent_first[3:])


def test_batch_reply_failing_validation_is_repaired_online(cache, stage):
    with FakeOpenAI() as server:
        server.reply = lambda body: (
            "not json at all"
            if len(body["messages"]) == 2
            else {"caption": "fixed", "objects": ["x"], "salience": 1}
        )
        out = run_chat(
            reqs(2), settings(batch_spec("openai", server)), build_seed=1, stage=stage, cache=cache
        )
        assert [r.parsed.caption for r in out] == ["fixed", "fixed"]
        assert len(server.requests) == 2  # the two repair turns, online
        assert all("not valid JSON" in b["messages"][-1]["content"] for b in server.requests)


def test_batch_line_errors_become_rows(cache, stage):
    from forenset.testing.fake_gemini import Fault

    with FakeGemini() as server:
        server.fault_for = lambda body: (
            Fault(refusal="no") if "pair 1" in json.dumps(body) else None
        )
        out = run_chat(
            reqs(3), settings(batch_spec("gemini", server)), build_seed=1, stage=stage, cache=cache
        )
        assert [r.status for r in out] == ["ok", "error", "ok"]
        assert "SAFETY" in out[1].error and not out[1].retryable
