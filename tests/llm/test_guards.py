"""Stage guards: error-rate abort, budget cap, response cache, pools, threads, secrets."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from llm_kit import GEMINI_SENTINEL, SENTINEL_KEY, Caption, gemini_spec, openai_spec, settings

from forenset.backends.llm import (
    ChatRequest,
    choose_model,
    limiter_stats,
    run_chat,
    stage_usage,
)
from forenset.backends.llm.types import SameFailure
from forenset.errors import ConfigurationError
from forenset.testing.fake_openai import Fault


def reqs(n: int, prefix: str = "it") -> list[ChatRequest]:
    return [
        ChatRequest(
            task="caption",
            item_id=f"{prefix}{i}",
            system="s",
            user=f"describe item {prefix}{i}",
            response_model=Caption,
        )
        for i in range(n)
    ]


def test_wrong_key_stops_the_stage_with_one_sentence(openai_server, stage):
    openai_server.fault_for = lambda body: Fault(status=401)
    s = settings(openai_spec(openai_server, max_concurrency=2), max_error_rate=0.5, error_window=5)
    with pytest.raises(SameFailure) as info:  # every call failed alike: stops the build
        run_chat(reqs(40), s, build_seed=3, stage=stage, cache=None)
    msg = str(info.value)
    assert msg.count(". ") == 0 and msg.endswith(".") and "401" in msg and stage in msg
    assert f"at {s.pool[0].base_url} failed" in msg  # the server the user must fix
    assert isinstance(info.value, ConfigurationError)  # the build exits non-zero
    assert len(openai_server.requests) < 15  # stopped early, did not burn all 40
    with pytest.raises(SameFailure):  # later shards of the stage stop at once
        run_chat(reqs(3, "later"), s, build_seed=3, stage=stage, cache=None)
    assert len(openai_server.requests) < 15


def test_isolated_errors_do_not_stop_the_stage(openai_server, stage):
    openai_server.fault_for = lambda body: (
        Fault(status=404) if "item it3 " in body["messages"][-1]["content"] + " " else None
    )
    s = settings(openai_spec(openai_server), max_error_rate=0.2, error_window=5)
    out = run_chat(reqs(10), s, build_seed=3, stage=stage, cache=None)
    assert [r.status for r in out].count("error") == 1 and out[3].status == "error"


def test_budget_cap_returns_remaining_items_as_retryable_errors(openai_server, stage):
    spec = openai_spec(
        openai_server, price_in_per_mtok=1000.0, price_out_per_mtok=1000.0, max_concurrency=1
    )
    s = settings(spec, budget_usd=0.4, max_tokens=256)  # 256 output tokens reserved per call
    out = run_chat(reqs(10), s, build_seed=1, stage=stage, cache=None)
    ok = [r for r in out if r.status == "ok"]
    stopped = [r for r in out if r.status == "error"]
    assert ok and stopped
    assert all(r.error == "budget exhausted" and r.retryable for r in stopped)
    usage = stage_usage(stage, 1)
    assert usage["spent_usd"] == pytest.approx(sum(r.cost_usd for r in out))
    assert usage["spent_usd"] <= 0.4 + max(r.cost_usd for r in ok)
    assert len(openai_server.requests) == len(ok)


def test_cache_reuses_answers_and_never_pays_twice(openai_server, cache, stage):
    spec = openai_spec(openai_server, price_in_per_mtok=1.0)
    first = run_chat(reqs(5), settings(spec), build_seed=1, stage=stage, cache=cache)
    assert len(openai_server.requests) == 5
    files = sorted(Path(cache.root, "cache", "llm").rglob("*.json"))
    assert len(files) == 5 and all(f.parent.name == f.stem[:2] for f in files)
    again = run_chat(reqs(5), settings(spec), build_seed=1, stage=stage + "b", cache=cache)
    assert len(openai_server.requests) == 5
    assert all(r.cached and r.cost_usd == 0 and r.attempts == 0 for r in again)
    assert [r.parsed for r in again] == [r.parsed for r in first]
    changed = reqs(5)
    changed[0].temperature = 0.7
    run_chat(changed, settings(spec), build_seed=1, stage=stage, cache=cache)
    assert len(openai_server.requests) == 6  # only the changed params reached the server


def test_pool_sampling_is_seeded_and_recorded(openai_server, gemini_server, stage):
    pool = [openai_spec(openai_server, weight=3.0), gemini_spec(gemini_server, weight=1.0)]
    picks = [choose_model(pool, 7, "captions", f"id{i}").backend for i in range(400)]
    assert picks == [choose_model(pool, 7, "captions", f"id{i}").backend for i in range(400)]
    assert 0.65 < picks.count("openai") / 400 < 0.85
    out = run_chat(reqs(20), settings(*pool), build_seed=7, stage=stage, cache=None)
    assert all(r.status == "ok" for r in out)
    want = [choose_model(pool, 7, stage, f"it{i}").backend for i in range(20)]
    assert [r.backend for r in out] == want
    assert len(openai_server.requests) == want.count("openai")
    assert len(gemini_server.requests) == want.count("gemini")


def test_concurrent_calls_from_threads_share_one_limiter(openai_server, stage):
    openai_server.latency_s = 0.05
    spec = openai_spec(openai_server, max_concurrency=3)
    results: dict[int, list] = {}

    def shard(k: int) -> None:
        results[k] = run_chat(
            reqs(6, f"t{k}_"), settings(spec), build_seed=1, stage=stage, cache=None
        )

    threads = [threading.Thread(target=shard, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.status == "ok" for k in results for r in results[k])
    assert limiter_stats(spec)["requests"] == 24
    assert 2 <= openai_server.peak_in_flight <= 3  # one limiter for all four shards


def test_keys_never_leak(openai_server, gemini_server, cache, stage, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    openai_server.script(Fault(status=401), Fault(status=429, retry_after_s=0.01))
    gemini_server.script(Fault(status=401))
    pool = [openai_spec(openai_server, batch=False), gemini_spec(gemini_server)]
    s = settings(*pool, max_retries=1)
    texts: list[str] = []
    for spec in pool:
        out = run_chat(
            reqs(3, spec.backend),
            s.model_copy(update={"pool": [spec]}),
            build_seed=1,
            stage=stage,
            cache=cache,
        )
        assert any(r.status == "error" for r in out)
        texts += [repr(r) + str(r.error) + r.text for r in out]
    texts += [repr(spec) for spec in pool] + [repr(s), str(s.model_dump())]
    written = [
        p.read_bytes().decode("utf-8", "replace")
        for p in Path(cache.root).rglob("*")
        if p.is_file()
    ]
    captured = capsys.readouterr()
    logs = caplog.text + captured.out + captured.err
    blob = "\n".join([*texts, *written, logs])
    assert "401" in blob  # the errors that echoed the keys were recorded...
    assert SENTINEL_KEY not in blob and GEMINI_SENTINEL not in blob  # ...without them
    assert SENTINEL_KEY[3:15] not in blob
    echoed = [h.get("authorization") for h in openai_server.request_headers]
    assert f"Bearer {SENTINEL_KEY}" in echoed  # the key really was sent
