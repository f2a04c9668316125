"""The one client under faults, against the loopback fake: overload vs one item's bad luck,
Retry-After per request, hedging a stalled request (counts and order only, no timings)."""

from __future__ import annotations

import re
import threading
import time

from llm_kit import Caption, openai_spec, settings

from forenset.backends.llm import ChatRequest, limiter_stats, run_chat
from forenset.testing.fake_openai import FakeOpenAI, Fault, last_user_text


def req(i: int) -> ChatRequest:
    return ChatRequest(
        task="caption",
        item_id=f"img{i}",
        system="Describe factually.",
        user=f"Caption image number {i} please",
        response_model=Caption,
    )


def run(spec, n: int, stage: str, start: int = 0):
    reqs = [req(i) for i in range(start, start + n)]
    return run_chat(reqs, settings(spec), build_seed=1, stage=stage, cache=None)


def test_a_single_500_does_not_reduce_the_limit(openai_server, stage):
    openai_server.script(Fault(status=500))
    spec = openai_spec(openai_server, max_concurrency=8)
    out = run(spec, 6, stage)
    assert all(r.ok for r in out)
    assert sorted(r.attempts for r in out)[-1] == 2
    stats = limiter_stats(spec)
    assert stats["concurrency_limit"] == 8 and stats["overloads"] == 0 and stats["holds"] == 0


def test_a_cluster_of_429s_reduces_the_limit_and_every_row_still_comes_back(stage):
    with FakeOpenAI() as server:
        server.script(*[Fault(status=429, retry_after_s=0.05) for _ in range(6)])
        spec = openai_spec(server, max_concurrency=8, rpm=6000, overload_window=8)
        out = run(spec, 8, stage)
        assert all(r.ok for r in out)
        stats = limiter_stats(spec)
        assert stats["throttled"] == 6
        assert stats["overloads"] >= 1 and "429s" in stats["last_overload"]
        assert stats["concurrency_limit"] < 8 and stats["holds"] >= 1
        assert stats["rpm"] < 6000


def test_a_lone_429_delays_its_own_request_by_its_retry_after_and_no_other(stage):
    arrivals: list[tuple[int, float]] = []
    lock = threading.Lock()
    with FakeOpenAI() as server:

        def fault_for(body):
            m = re.search(r"number (\d+) ", last_user_text(body))
            assert m is not None
            i = int(m.group(1))
            with lock:
                arrivals.append((i, time.monotonic()))
                first = len(arrivals) == 1
            return Fault(status=429, retry_after_s=0.4) if first else None

        server.fault_for = fault_for
        spec = openai_spec(server, max_concurrency=2, rpm=6000)
        out = run(spec, 8, stage)
        assert all(r.ok for r in out)
        throttled = arrivals[0][0]
        times = [t for i, t in arrivals if i == throttled]
        assert len(times) == 2 and times[1] - times[0] >= 0.4  # its own Retry-After
        others = [i for i, _ in arrivals[1:] if i != throttled]
        assert sorted(others) == sorted(set(range(8)) - {throttled})  # each sent once
        stats = limiter_stats(spec)
        assert stats["throttled"] == 1 and stats["holds"] == 0 and stats["overloads"] == 0
        assert stats["concurrency_limit"] == 2 and stats["rpm"] == 6000


def test_a_429d_item_is_retried_before_the_fresh_items_still_queued(stage):
    """Its Retry-After is its whole wait: the retry does not queue behind the stage."""
    arrivals: list[int] = []
    lock = threading.Lock()
    with FakeOpenAI(latency_s=0.05) as server:

        def fault_for(body):
            m = re.search(r"number (\d+) ", last_user_text(body))
            assert m is not None
            with lock:
                arrivals.append(int(m.group(1)))
                first = len(arrivals) == 1
            return Fault(status=429, retry_after_s=0.05) if first else None

        server.fault_for = fault_for
        spec = openai_spec(server, max_concurrency=1, rpm=60000)
        out = run(spec, 16, stage)
        assert all(r.ok for r in out)
        throttled = arrivals[0]
        retry_at = arrivals.index(throttled, 1)
        # one request at a time, 0.05 s each: the retry is due after about two others
        assert retry_at < len(arrivals) - 1, arrivals


def test_a_stalled_request_is_hedged_after_the_latency_tail_and_its_row_is_ok(stage):
    with FakeOpenAI() as server:
        spec = openai_spec(
            server, timeout_s=60.0, hedge_floor_s=0.2, hedge_multiplier=2.0, max_concurrency=2
        )
        # the latencies hedging starts from (the first wave's are left out: cold starts)
        assert all(r.ok for r in run(spec, 24, stage))
        assert limiter_stats(spec)["hedges"] == 0
        server.script(Fault(delay_s=20.0))  # the next request stalls (timeout 60 s)
        [res] = run(spec, 1, stage, start=24)
        assert res.ok and res.attempts == 1 and "number 24 " in res.parsed.caption
        stats = limiter_stats(spec)
        assert stats["hedges"] == 1 and stats["hedge_wins"] == 1
        assert server.counts["/v1/chat/completions"] == 26  # 24, the stalled one, its hedge


def test_no_hedge_before_the_latency_tail_is_known(stage):
    with FakeOpenAI() as server:
        server.script(Fault(delay_s=0.5))
        spec = openai_spec(server, timeout_s=30.0, hedge_floor_s=0.01)
        [res] = run(spec, 1, stage)
        assert res.ok and limiter_stats(spec)["hedges"] == 0
        assert server.counts["/v1/chat/completions"] == 1
