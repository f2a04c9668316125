"""Limiter and parsing units (state semantics only; speed lives in bench/)."""

from __future__ import annotations

import asyncio
import time

import pytest

from forenset.backends.llm import extract_json
from forenset.backends.llm.limits import (
    AdaptiveConcurrency,
    ModelLimiter,
    Pacer,
    PriorityGate,
    parse_duration,
    retry_after_from,
)
from forenset.backends.llm.secrets import redact
from forenset.backends.llm.types import ModelSpec


def test_parse_duration_and_retry_after():
    assert parse_duration("6m0s") == 360.0
    assert parse_duration("1.5s") == 1.5
    assert parse_duration("120ms") == pytest.approx(0.12)
    assert parse_duration("2") == 2.0
    assert parse_duration("soon") is None
    assert retry_after_from({"Retry-After-Ms": "250", "retry-after": "3"}) == 0.25
    assert retry_after_from({"retry-after": "3"}) == 3.0
    assert retry_after_from({"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}) is None


def test_extract_json_variants():
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('Here:\n```json\n{"a": [1, 2]}\n```\nDone') == {"a": [1, 2]}
    assert extract_json('```\n{"b": true}\n```') == {"b": True}
    assert extract_json('Sure, {"c": "x"} is it') == {"c": "x"}
    with pytest.raises(ValueError):
        extract_json("no json here")


def test_pacer_debt_refund_hold_and_rate_change():
    p = Pacer(rate_per_s=10.0)
    t0 = p.next_at
    p.adjust(5)  # charged 5 units more than estimated: the next send moves 0.5 s on
    assert p.next_at == pytest.approx(t0 + 0.5)
    p.adjust(-2)
    assert p.next_at == pytest.approx(t0 + 0.3)
    p.hold(t0 + 0.1)  # an earlier hold does not pull the next send forward
    assert p.next_at == pytest.approx(t0 + 0.3)
    p.hold(t0 + 2.0)
    assert p.next_at == t0 + 2.0
    p.set_rate(20.0)
    assert p.rate == 20.0


def test_aimd_cuts_once_per_burst_and_recovers():
    c = AdaptiveConcurrency(16, decrease=0.5, cooldown_s=60.0)
    c.on_throttle()
    c.on_throttle()  # same burst: no second cut
    assert c.limit == 8.0
    for _ in range(100):
        c.on_success()
    assert c.limit == 16.0


def test_aimd_bounds_in_flight():
    async def go():
        c = AdaptiveConcurrency(2)
        peak = 0

        async def worker():
            nonlocal peak
            await c.acquire()
            peak = max(peak, c.in_flight)
            await asyncio.sleep(0.001)
            await c.release()

        await asyncio.gather(*(worker() for _ in range(10)))
        return peak

    assert asyncio.run(go()) == 2


def test_the_gate_serves_urgent_waiters_first_then_in_arrival_order():
    async def go():
        gate = PriorityGate(1)
        await gate.acquire()
        order: list[str] = []

        async def waiter(name: str, urgent: bool):
            await gate.acquire(urgent)
            order.append(name)
            gate.release()

        tasks = []
        for name, urgent in (("fresh1", False), ("fresh2", False), ("retry", True)):
            tasks.append(asyncio.create_task(waiter(name, urgent)))
            await asyncio.sleep(0)  # queued in this order
        gate.release()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(go()) == ["retry", "fresh1", "fresh2"]


def test_a_cancelled_waiter_takes_no_slot_and_a_handed_slot_comes_back():
    async def go():
        gate = PriorityGate(1)
        await gate.acquire()
        gone = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        gone.cancel()  # cancelled while queued
        handed = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)
        gate.release()  # the slot is handed to ``handed`` ...
        handed.cancel()  # ... which is cancelled before it runs: the slot must come back
        for t in (gone, handed):
            with pytest.raises(asyncio.CancelledError):
                await t
        assert gate.held == 0
        await asyncio.wait_for(gate.acquire(), 1.0)  # free, not leaked
        return gate.held

    assert asyncio.run(go()) == 1


def test_raising_the_concurrency_limit_admits_a_waiter_without_a_release():
    async def go():
        c = AdaptiveConcurrency(4)
        c.limit = 1.0
        await c.acquire()
        waiter = asyncio.create_task(c.acquire())
        await asyncio.sleep(0.01)
        assert not waiter.done()
        c.limit = 2.0  # AIMD grew the limit: the waiter goes now, not at the next release
        await asyncio.wait_for(waiter, 1.0)
        return c.in_flight

    assert asyncio.run(go()) == 2


def test_an_urgent_send_goes_through_the_pacer_before_queued_fresh_ones():
    async def go():
        p = Pacer(rate_per_s=50.0)
        order: list[str] = []

        async def send(name: str, urgent: bool):
            await p.acquire(1.0, urgent)
            order.append(name)

        tasks = [asyncio.create_task(send(f"fresh{i}", False)) for i in range(4)]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(send("retry", True)))
        await asyncio.gather(*tasks)
        return order

    order = asyncio.run(go())
    # fresh0 went at once and fresh1 was already waiting for its instant; the retry is next
    assert order.index("retry") <= 2 and order[-1] == "fresh3"


def test_headers_teach_limits_and_pause_at_zero():
    lim = ModelLimiter.from_spec(ModelSpec(backend="openai", model="m"))
    assert lim.requests is None and lim.tokens is None
    lim.update_from_headers(
        {
            "x-ratelimit-limit-requests": "600",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "2s",
            "x-ratelimit-limit-tokens": "60000",
        }
    )
    assert lim.requests is not None and lim.requests.rate == 10.0
    assert lim.tokens is not None and lim.tokens.rate == 1000.0
    assert lim.paused_until > 0
    assert lim.requests.next_at >= lim.paused_until  # the pacer honours the hold too


def test_headers_may_lower_the_configured_caps_but_never_raise_them():
    lim = ModelLimiter.from_spec(ModelSpec(backend="openai", model="m", rpm=60, tpm=6000))
    assert lim.requests is not None and lim.tokens is not None
    lim.update_from_headers(
        {"x-ratelimit-limit-requests": "600", "x-ratelimit-limit-tokens": "60000"}
    )
    assert lim.requests.rate == 1.0 and lim.tokens.rate == 100.0
    lim.update_from_headers({"x-ratelimit-limit-requests": "30", "x-ratelimit-limit-tokens": "600"})
    assert lim.requests.rate == 0.5 and lim.tokens.rate == 10.0
    lim.update_from_headers({"x-ratelimit-limit-requests": "6000"})  # back up: only to the cap
    assert lim.requests.rate == 1.0


def test_isolated_429s_and_500s_delay_only_their_item():
    lim = ModelLimiter.from_spec(ModelSpec(backend="openai", model="m", rpm=600))
    for i in range(300):  # a 429 every 10th call, a 500 every 7th: below the cluster share
        if i % 10 == 0:
            assert lim.on_throttle(2.0) is False
        elif i % 7 == 0:
            assert lim.record("error") is False
        else:
            lim.record("ok", 0.2)
    assert lim.paused_until == 0.0 and lim.stats.holds == 0 and lim.stats.overloads == 0
    assert lim.concurrency.limit == lim.concurrency.maximum
    assert lim.requests is not None and lim.requests.rate == 10.0
    assert lim.stats.throttled == 30


def test_clustered_429s_cut_concurrency_and_pace_and_hold_the_model_once():
    spec = ModelSpec(backend="openai", model="m", rpm=600, overload_window=16)
    lim = ModelLimiter.from_spec(spec)  # 16 x 0.25: the 4th 429 of 16 calls is a cluster
    assert [lim.on_throttle(0.5) for _ in range(4)] == [False, False, False, True]
    assert lim.stats.overloads == 1 and lim.stats.holds == 1
    assert "4 of the last 4 calls were 429s" in (lim.stats.last_overload or "")
    assert lim.concurrency.limit == pytest.approx(0.7 * lim.concurrency.maximum)
    assert lim.requests is not None and lim.requests.rate == pytest.approx(7.0)
    held = lim.paused_until
    assert held > 0 and lim.requests.next_at >= held
    assert lim.on_throttle(0.5) is False  # the window starts afresh after a cut
    assert lim.stats.overloads == 1 and lim.paused_until == held


def test_sporadic_429s_bunched_8_in_32_are_no_overload_but_a_real_cluster_is():
    lim = ModelLimiter.from_spec(ModelSpec(backend="openai", model="m", rpm=2280))
    for i in range(64):  # 8 429s within 32 calls: chance bunching of 6 % sporadic 429s
        if 20 <= i < 52 and i % 4 == 0:
            assert lim.on_throttle(1.0) is False
        else:
            lim.record("ok", 0.25)
    assert lim.stats.overloads == 0 and lim.concurrency.limit == lim.concurrency.maximum
    held = [lim.on_throttle(1.0) if i % 3 == 0 else lim.record("ok", 0.25) for i in range(64)]
    assert any(held) and lim.stats.overloads == 1  # ~1 in 3: an overloaded server


def test_the_pace_grows_back_to_its_ceiling_and_no_further():
    spec = ModelSpec(backend="openai", model="m", rpm=600, overload_window=32)
    lim = ModelLimiter.from_spec(spec)
    for _ in range(8):
        lim.on_throttle(None)
    assert lim.requests is not None and lim.requests.rate == pytest.approx(7.0)
    assert lim.paused_until == 0.0  # no Retry-After: nothing to hold for
    for _ in range(2000):
        lim.record("ok", 0.1)
    assert lim.requests.rate == 10.0 and lim.concurrency.limit == lim.concurrency.maximum


def test_climbing_latency_cuts_the_concurrency_not_the_pace():
    spec = ModelSpec(backend="openai", model="m", rpm=600, overload_window=32)
    lim = ModelLimiter.from_spec(spec)
    for _ in range(32):
        lim.record("ok", 0.2)
    assert lim.stats.overloads == 0
    for _ in range(15):  # half the window slower: the median has not moved yet
        lim.record("ok", 1.0)
    assert lim.stats.overloads == 0
    for _ in range(2):
        lim.record("ok", 1.0)
    assert lim.stats.overloads == 1 and "latency" in (lim.stats.last_overload or "")
    assert lim.concurrency.limit < lim.concurrency.maximum
    assert lim.requests is not None and lim.requests.rate == 10.0


def test_hedge_delay_follows_the_latency_tail_with_a_floor():
    lim = ModelLimiter.from_spec(ModelSpec(backend="openai", model="m", timeout_s=10.0))
    for _ in range(19):
        lim.record("ok", 0.1)
    assert lim.hedge_delay() is None  # too few latencies seen
    lim.record("ok", 0.1)
    assert lim.hedge_delay() == 1.0  # 3 x 0.1 s is under the 1 s floor
    for _ in range(200):
        lim.record("ok", 0.5)
    assert lim.hedge_delay() == pytest.approx(1.5)
    for _ in range(200):
        lim.record("ok", 3.0)
    assert lim.hedge_delay() == 5.0  # 9 s: capped at half the 10 s timeout
    for _ in range(200):
        lim.record("ok", 5.0)
    assert lim.hedge_delay() is None  # the tail itself reaches half the timeout
    off = ModelLimiter.from_spec(ModelSpec(backend="openai", model="m", hedge_multiplier=0))
    local = ModelLimiter.from_spec(ModelSpec(backend="openai", model="m"))
    local.slots = 1  # a self-hosted server with one generation slot
    for lim in (off, local):
        for _ in range(30):
            lim.record("ok", 0.1)
        assert lim.hedge_delay() is None


def test_a_429_saying_nothing_remains_holds_until_the_reset_without_a_cut():
    lim = ModelLimiter.from_spec(ModelSpec(backend="openai", model="m"))
    some_left = {"x-ratelimit-remaining-requests": "12", "x-ratelimit-remaining-tokens": "900"}
    for _ in range(3):
        lim.update_from_headers(some_left)
        assert lim.on_throttle(1.0, some_left) is False
    assert lim.paused_until == 0.0 and lim.stats.throttled == 3
    assert lim.concurrency.limit == lim.concurrency.maximum  # no overload shown: no AIMD cut
    gone = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "300ms"}
    lim.update_from_headers(gone)  # attempt() reads every reply's headers, a 429's too
    lim.on_throttle(1.0, gone)
    assert lim.paused_until > 0
    assert lim.concurrency.limit == lim.concurrency.maximum


def test_redact_masks_key_like_tokens():
    assert "sk-abc" not in redact("Incorrect API key provided: sk-abc123def456")
    assert redact("plain text 401") == "plain text 401"


def test_the_first_wave_of_calls_is_left_out_of_the_latency_tail():
    lim = ModelLimiter.from_spec(ModelSpec(backend="openai", model="m"))
    t0 = time.monotonic()
    for _ in range(30):  # sent together, answered slowly (one cold start they all waited on)
        lim.record("ok", 5.0, started=t0)
    assert lim.window.quantile(0.95) is None
    later = time.monotonic()
    for _ in range(20):
        lim.record("ok", 0.2, started=later)
    assert lim.window.quantile(0.95) == pytest.approx(0.2)
