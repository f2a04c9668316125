"""Pacing against a strict server, header caps, hold scope and refusal fallback.

No timing thresholds: the assertions are counts the server keeps (429s beyond its window),
limiter counters (holds), and which model answered.
"""

from __future__ import annotations

import asyncio

from llm_kit import Caption, openai_spec, settings

from forenset.backends.llm import ChatRequest, limiter_stats, run_chat
from forenset.backends.llm.limits import Pacer
from forenset.testing._base import SlidingWindow
from forenset.testing.fake_openai import FakeOpenAI, Fault


def req(i: int) -> ChatRequest:
    return ChatRequest(
        task="caption",
        item_id=f"img{i}",
        system="Describe factually.",
        user=f"Caption image number {i} please",
        response_model=Caption,
    )


def test_sliding_window_admits_n_per_second_and_says_when_the_next_fits():
    w = SlidingWindow(5)
    assert [w.take() for _ in range(5)] == [0.0] * 5
    wait = w.take()
    assert 0 < wait <= 1.0
    assert w.remaining() == 0


def test_pacer_spreads_sends_and_no_window_holds_more_than_the_rate():
    """30 sends at 20/s: no one-second window holds more than 20 (a bucket starting full
    would send 20 at once and 19 more within that second), and they span at least their
    even spacing less the catch-up allowance. Each send's time is the instant the pacer let
    it go (its log's newest entry, read before anything else runs): a clock read after
    ``acquire`` returns can be late by a preemption on a loaded machine, and one late first
    send in a window put 21 in it (seen under CI load) although the pacer sent 20."""
    rate = 20.0

    async def go() -> tuple[list[float], float]:
        p = Pacer(rate)
        times: list[float] = []

        async def one() -> None:
            await p.acquire()
            times.append(p.sent[-1][0])

        await asyncio.gather(*(one() for _ in range(30)))
        return sorted(times), p.catchup_s

    times, catchup = asyncio.run(go())
    worst = max(sum(1 for t in times if s <= t < s + 1.0) for s in times)
    assert worst <= rate
    assert times[-1] - times[0] >= 29 / rate - catchup
    assert times[2] - times[0] >= 2 / rate - 1e-3  # from idle: no catch-up, even from the first


def test_no_over_rate_429s_at_the_configured_rate_under_a_strict_window(stage):
    """The server reports 1200 rpm in its headers; the configured 960 stays the cap, sends
    are spread over the window, so the strict server never has to refuse one."""
    with FakeOpenAI(
        latency_s=0.02, rate_limit_rps=20, strict_window=True, ratelimit_headers=True
    ) as server:
        spec = openai_spec(server, rpm=960, max_concurrency=32)
        out = run_chat(
            [req(i) for i in range(45)], settings(spec), build_seed=1, stage=stage, cache=None
        )
        assert all(r.ok for r in out)
        assert server.rate_limited == 0
        assert len(server.requests) == 45
        stats = limiter_stats(spec)
        assert stats["rpm"] == 960 and stats["header_updates"] >= 45 and stats["throttled"] == 0


def test_strict_window_refuses_a_burst(stage):
    """The check above can fail: a client sending faster than the window gets 429s."""
    with FakeOpenAI(rate_limit_rps=5, strict_window=True) as server:
        spec = openai_spec(server, max_concurrency=16)
        out = run_chat(
            [req(i) for i in range(12)], settings(spec), build_seed=1, stage=stage, cache=None
        )
        assert all(r.ok for r in out)  # retried after Retry-After
        assert server.rate_limited > 0


def test_an_isolated_retry_after_delays_only_its_item(stage):
    with FakeOpenAI() as server:
        server.script(Fault(status=429, retry_after_s=0.3))
        spec = openai_spec(server, rpm=6000, max_concurrency=1)
        out = run_chat(
            [req(i) for i in range(6)], settings(spec), build_seed=1, stage=stage, cache=None
        )
        assert all(r.ok for r in out)
        assert sorted(r.attempts for r in out) == [1, 1, 1, 1, 1, 2]
        stats = limiter_stats(spec)
        assert stats["throttled"] == 1 and stats["holds"] == 0


def test_a_refusal_is_retried_once_on_another_pool_model(stage):
    with FakeOpenAI() as server:
        server.fault_for = lambda body: (
            Fault(refusal="I won't describe that.") if body["model"] == "m1" else None
        )
        m1, m2 = openai_spec(server, model="m1"), openai_spec(server, model="m2")
        out = run_chat(
            [req(i) for i in range(12)],
            settings(m1, m2, regenerations=0),
            build_seed=1,
            stage=stage,
            cache=None,
        )
        assert all(r.ok and r.model == "m2" for r in out)
        fell_back = [r for r in out if r.refused_by]
        assert fell_back and all(r.refused_by == "openai/m1" for r in fell_back)
        assert all(r.attempts == 2 for r in fell_back)
        assert all(r.refused_by is None and r.attempts == 1 for r in out if r not in fell_back)


def test_a_second_refusal_is_final_and_a_lone_model_gets_no_fallback(stage):
    with FakeOpenAI() as server:
        server.fault_for = lambda body: Fault(refusal="No.")
        m1, m2 = openai_spec(server, model="m1"), openai_spec(server, model="m2")
        out = run_chat(
            [req(i) for i in range(4)],
            settings(m1, m2, regenerations=0),
            build_seed=1,
            stage=stage,
            cache=None,
        )
        assert all(r.status == "error" and "refused" in r.error for r in out)
        assert all(r.attempts == 2 and r.refused_by is not None for r in out)
        assert all(r.refused_by != f"openai/{r.model}" for r in out)  # the other model's
        lone_settings = settings(m1, regenerations=0)
        [lone] = run_chat([req(9)], lone_settings, build_seed=1, stage=stage + "x", cache=None)
        assert lone.status == "error" and lone.refused_by is None and lone.attempts == 1


def test_models_of_one_rate_group_pace_through_one_limiter(stage):
    with FakeOpenAI() as server:
        a = openai_spec(server, model="a", rpm=6000, rate_group="srv")
        b = openai_spec(server, model="b", rpm=6000, rate_group="srv")
        c = openai_spec(server, model="c", rpm=6000)
        run_chat(
            [req(i) for i in range(8)], settings(a, b, c), build_seed=1, stage=stage, cache=None
        )
        [used_a, used_b, used_c] = [r for r in (limiter_stats(s)["requests"] for s in (a, b, c))]
        assert used_a == used_b and used_a + used_c == 8 and used_c < 8
