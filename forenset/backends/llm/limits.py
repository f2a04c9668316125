"""Throughput control per (backend, base_url, model): token buckets + AIMD concurrency.

All limiter objects live on the process's one API loop (see ../apiloop.py), so every
shard/thread of the process shares them without locks.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from forenset.backends.llm.types import ModelSpec


class TokenBucket:
    """``rate_per_s`` tokens per second, burst of ``capacity``; FIFO waiters; debt allowed."""

    def __init__(self, rate_per_s: float, capacity: float) -> None:
        self.rate = rate_per_s
        self.capacity = capacity
        self.level = capacity
        self.t = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self.t) * self.rate)
        self.t = now

    def set_rate(self, rate_per_s: float, capacity: float) -> None:
        self._refill()
        self.rate, self.capacity = rate_per_s, capacity
        self.level = min(self.level, capacity)

    def cap_level(self, level: float) -> None:
        """Never believe we have more than the server says remains."""
        self._refill()
        self.level = min(self.level, level)

    def adjust(self, delta: float) -> None:
        """Charge (positive) or refund (negative) after the real size is known."""
        self._refill()
        self.level -= delta

    async def acquire(self, n: float = 1.0) -> None:
        async with self._lock:
            need = min(n, self.capacity)
            while True:
                self._refill()
                if self.level >= need:
                    self.level -= n
                    return
                await asyncio.sleep((need - self.level) / self.rate)


class AdaptiveConcurrency:
    """A semaphore whose size follows AIMD: +1/limit per success, x0.7 per throttle burst."""

    def __init__(self, maximum: int, *, decrease: float = 0.7, cooldown_s: float = 1.0) -> None:
        self.maximum = maximum
        self.limit = float(maximum)
        self.in_flight = 0
        self.decrease = decrease
        self.cooldown_s = cooldown_s
        self._last_cut = 0.0
        self._cond = asyncio.Condition()

    async def acquire(self) -> None:
        async with self._cond:
            await self._cond.wait_for(lambda: self.in_flight < max(1, int(self.limit)))
            self.in_flight += 1

    async def release(self) -> None:
        async with self._cond:
            self.in_flight -= 1
            self._cond.notify_all()

    def on_success(self) -> None:
        self.limit = min(float(self.maximum), self.limit + 1.0 / max(self.limit, 1.0))

    def on_throttle(self) -> None:
        """One cut per cooldown: a burst of 429s from one overload counts once."""
        now = time.monotonic()
        if now - self._last_cut >= self.cooldown_s:
            self.limit = max(1.0, self.limit * self.decrease)
            self._last_cut = now


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(text: str) -> float | None:
    """OpenAI reset values like '1s', '6m0s', '120ms', or a bare number of seconds."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    total, found = 0.0, False
    for value, unit in _DURATION.findall(text):
        found = True
        total += float(value) * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[unit]
    return total if found else None


def retry_after_from(headers: Mapping[str, str]) -> float | None:
    """Seconds from retry-after-ms / retry-after (seconds, not HTTP dates)."""
    h = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in h:
        try:
            return float(h["retry-after-ms"]) / 1000.0
        except ValueError:
            pass
    if "retry-after" in h:
        try:
            return float(h["retry-after"])
        except ValueError:
            return None
    return None


@dataclass
class LimiterStats:
    requests: int = 0
    throttled: int = 0
    header_updates: int = 0
    paused_s: float = 0.0


@dataclass
class ModelLimiter:
    """Everything that paces calls to one (backend, base_url, model)."""

    key: tuple[str, str, str]
    concurrency: AdaptiveConcurrency
    requests: TokenBucket | None
    tokens: TokenBucket | None
    paused_until: float = 0.0
    stats: LimiterStats = field(default_factory=LimiterStats)

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> ModelLimiter:
        key = (spec.backend, spec.base_url or "", spec.model)
        req = TokenBucket(spec.rpm / 60.0, max(1.0, spec.rpm / 60.0)) if spec.rpm else None
        tok = TokenBucket(spec.tpm / 60.0, max(1.0, spec.tpm / 60.0)) if spec.tpm else None
        return cls(key, AdaptiveConcurrency(spec.max_concurrency), req, tok)

    async def acquire(self, est_tokens: int) -> None:
        """Wait for a concurrency slot, any Retry-After pause, then rate tokens."""
        await self.concurrency.acquire()
        try:
            while (wait := self.paused_until - time.monotonic()) > 0:
                self.stats.paused_s += wait
                await asyncio.sleep(wait)
            if self.requests is not None:
                await self.requests.acquire(1.0)
            if self.tokens is not None:
                await self.tokens.acquire(float(est_tokens))
        except BaseException:
            await self.concurrency.release()
            raise
        self.stats.requests += 1

    async def release(self, *, est_tokens: int, used_tokens: int | None) -> None:
        if self.tokens is not None and used_tokens is not None:
            self.tokens.adjust(used_tokens - est_tokens)
        await self.concurrency.release()

    def pause(self, seconds: float) -> None:
        self.paused_until = max(self.paused_until, time.monotonic() + seconds)

    def on_throttle(self, retry_after_s: float | None) -> None:
        self.stats.throttled += 1
        self.concurrency.on_throttle()
        if retry_after_s:
            self.pause(retry_after_s)

    def update_from_headers(self, headers: Mapping[str, str]) -> None:
        """Follow x-ratelimit-* headers: learn the real limits, pause at zero remaining."""
        h = {k.lower(): v for k, v in headers.items()}
        if not any(k.startswith("x-ratelimit-") for k in h):
            return
        self.stats.header_updates += 1
        for kind in ("requests", "tokens"):
            limit = _num(h.get(f"x-ratelimit-limit-{kind}"))
            remaining = _num(h.get(f"x-ratelimit-remaining-{kind}"))
            reset = parse_duration(h.get(f"x-ratelimit-reset-{kind}", "") or "")
            if limit:
                bucket = self.requests if kind == "requests" else self.tokens
                rate, cap = limit / 60.0, max(1.0, limit / 60.0)
                if bucket is None:
                    bucket = TokenBucket(rate, cap)
                    if kind == "requests":
                        self.requests = bucket
                    else:
                        self.tokens = bucket
                elif abs(bucket.rate - rate) > 1e-9:
                    bucket.set_rate(rate, cap)
            if remaining is not None and remaining <= 0 and reset:
                self.pause(reset)


def _num(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def estimate_tokens(text: str, n_images: int, max_tokens: int | None) -> int:
    """Pre-call token estimate for the tpm bucket (~4 chars/token, ~800 per image)."""
    return len(text) // 4 + 800 * n_images + (max_tokens or 256)
