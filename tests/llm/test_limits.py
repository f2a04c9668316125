"""Limiter and parsing units (state semantics only; speed lives in bench/)."""

from __future__ import annotations

import asyncio

import pytest

from forenset.backends.llm import extract_json
from forenset.backends.llm.limits import (
    AdaptiveConcurrency,
    ModelLimiter,
    Pacer,
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


def test_one_isolated_429_holds_only_its_item_a_second_holds_the_model():
    lim = ModelLimiter.from_spec(ModelSpec(backend="openai", model="m", rpm=600))
    assert lim.on_throttle(2.0) is False  # one 429: its item waits, the model goes on
    assert lim.paused_until == 0.0 and lim.stats.holds == 0
    assert lim.on_throttle(0.5) is True  # a second within the window: the window is full
    held = lim.paused_until
    assert held > 0 and lim.stats.holds == 1 and lim.stats.throttled == 2
    assert lim.requests is not None and lim.requests.next_at >= held
    lim.on_throttle(0.1)  # a shorter Retry-After does not shorten, and holds never add up
    assert lim.paused_until == held


def test_429_headers_decide_the_hold_nothing_remaining_holds_at_once():
    lim = ModelLimiter.from_spec(ModelSpec(backend="openai", model="m"))
    some_left = {"x-ratelimit-remaining-requests": "12", "x-ratelimit-remaining-tokens": "900"}
    assert [lim.on_throttle(1.0, some_left) for _ in range(3)] == [False] * 3
    assert lim.paused_until == 0.0 and lim.stats.throttled == 3
    assert lim.concurrency.limit == lim.concurrency.maximum  # no overload shown: no AIMD cut
    assert lim.on_throttle(0.3, {"x-ratelimit-remaining-requests": "0"}) is True
    assert lim.paused_until > 0


def test_redact_masks_key_like_tokens():
    assert "sk-abc" not in redact("Incorrect API key provided: sk-abc123def456")
    assert redact("plain text 401") == "plain text 401"
