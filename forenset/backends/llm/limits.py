"""Throughput control per (backend, base_url, model): even pacers + AIMD concurrency.

All limiter objects live on the process's one API loop (see ../apiloop.py), so every
shard/thread of the process shares them without locks.

Overload and one item's bad luck are told apart by a sliding window of outcomes
(``OutcomeWindow``): a 429 or a 500 delays only its own item; the whole model slows down
(fewer in flight, a slower pace, a hold for the Retry-After) only when 429s cluster in the
window, when the window's median latency climbs well above the best seen, or when the
server says its limit is used up (x-ratelimit-remaining-* 0). The same window's latencies
set when a stalled request is hedged (``hedge_delay``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import re
import statistics
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from forenset.backends.llm.types import ModelSpec


class PriorityGate:
    """An asyncio semaphore of ``capacity`` slots whose waiters are served urgent first, then
    in arrival order, one wake-up per freed slot.

    Why not asyncio.Semaphore / Condition: an item retried after a 429's Retry-After, a hedge
    of a stalled request or a repair turn would queue behind every fresh item of the run
    (hundreds), so its row ends last and a stage's shard waits for it; here it goes next.
    And a Condition's ``notify_all`` wakes every waiter for each freed slot (O(n) task steps
    per call with hundreds queued), CPU that a loaded event loop pays in latency.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.held = 0
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def locked(self) -> bool:
        """Whether an acquire now would wait."""
        return self.held >= self.capacity

    async def acquire(self, urgent: bool = False) -> None:
        # every release and capacity change wakes waiters while slots are free, so a free
        # slot means no live waiter: taking it jumps no queue (cancelled entries may remain)
        if self.held < self.capacity:
            self.held += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (0 if urgent else 1, next(self._seq), fut))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # the slot was handed over: give it back
                self.release()
            raise

    def release(self) -> None:
        self.held -= 1
        self.wake()

    def set_capacity(self, capacity: int) -> None:
        self.capacity = capacity
        self.wake()

    def wake(self) -> None:
        """Hand free slots to the first waiters (cancelled ones are dropped)."""
        while self._waiters and self.held < self.capacity:
            _, _, fut = heapq.heappop(self._waiters)
            if not fut.done():
                fut.set_result(None)
                self.held += 1


class Pacer:
    """Even pacing at ``rate_per_s`` units per second, never more than a window's worth.

    Why not a token bucket: a bucket that starts full (or refills while idle) lets a whole
    window's worth go out at once, and a server that counts over a one-second window then
    sees up to twice its limit in that second. Here each acquire of ``n`` units waits for the
    pacer's next free instant and moves it ``n / rate`` seconds on, and a log of the last
    ``window_s`` seconds keeps any window to ``rate * window_s`` units (one oversized request
    may go alone). Waiters go urgent first (a retry, a hedge), then in arrival order; only the
    head sleeps, and it re-reads ``next_at`` after waking, so a ``hold`` placed while it
    sleeps still applies.

    Loop lag: when sends are queued and the head wakes late (a busy event loop), it may take
    back up to ``catchup_s`` of that lateness, so milliseconds of lag per send do not add up
    to a lower rate; the window log still caps what any window holds. After an idle spell
    nothing is taken back, so the next sends are evenly spaced from the first.
    Actual sizes are settled later with ``adjust`` (debt moves the next instant on, a refund
    moves it back).
    """

    def __init__(self, rate_per_s: float, window_s: float = 1.0, catchup_s: float = 0.25) -> None:
        self.rate = rate_per_s
        self.window_s = window_s
        self.catchup_s = catchup_s
        self.next_at = time.monotonic()
        self.sent: deque[tuple[float, float]] = deque()  # (time, units) of the last window
        self.in_window = 0.0
        self._gate = PriorityGate(1)

    def set_rate(self, rate_per_s: float) -> None:
        self.rate = rate_per_s

    def adjust(self, delta: float) -> None:
        """Charge (positive) or refund (negative) units once the real size is known."""
        self.next_at += delta / self.rate

    def hold(self, until: float) -> None:
        """Send nothing before ``until`` (monotonic seconds); later sends stay evenly paced."""
        self.next_at = max(self.next_at, until)

    def _window_wait(self, n: float, now: float) -> float:
        while self.sent and now - self.sent[0][0] >= self.window_s:
            self.in_window -= self.sent.popleft()[1]
        if not self.sent or self.in_window + n <= self.rate * self.window_s + 1e-9:
            return 0.0
        return self.sent[0][0] + self.window_s - now

    async def acquire(self, n: float = 1.0, urgent: bool = False) -> None:
        queued = self._gate.locked()
        await self._gate.acquire(urgent)
        try:
            while True:
                now = time.monotonic()
                wait = max(self.next_at - now, self._window_wait(n, now))
                if wait <= 0:
                    break
                queued = True
                await asyncio.sleep(wait)
            floor = now - self.catchup_s if queued else now
            self.next_at = max(self.next_at, floor) + n / self.rate
            self.sent.append((now, n))
            self.in_window += n
        finally:
            self._gate.release()


class AdaptiveConcurrency:
    """A semaphore whose size follows AIMD: +1/limit per success, x0.7 per throttle burst.
    Urgent acquires (an item's later attempts) go before fresh ones (``PriorityGate``)."""

    def __init__(self, maximum: int, *, decrease: float = 0.7, cooldown_s: float = 1.0) -> None:
        self.maximum = maximum
        self.decrease = decrease
        self.cooldown_s = cooldown_s
        self._last_cut = 0.0
        self._gate = PriorityGate(maximum)
        self.limit = float(maximum)

    @property
    def limit(self) -> float:
        return self._limit

    @limit.setter
    def limit(self, value: float) -> None:
        self._limit = value
        self._gate.set_capacity(max(1, int(value)))

    @property
    def in_flight(self) -> int:
        return self._gate.held

    async def acquire(self, urgent: bool = False) -> None:
        await self._gate.acquire(urgent)

    async def release(self) -> None:
        self._gate.release()

    def cap(self, n: int) -> None:
        """Never more than ``n`` in flight from now on (a server's slots)."""
        self.maximum = max(1, min(self.maximum, n))
        self.limit = min(self.limit, float(self.maximum))

    def on_success(self) -> None:
        self.limit = min(float(self.maximum), self.limit + 1.0 / max(self.limit, 1.0))

    def on_throttle(self) -> None:
        """One cut per cooldown: a burst of 429s from one overload counts once."""
        now = time.monotonic()
        if now - self._last_cut >= self.cooldown_s:
            self.cut()

    def cut(self) -> None:
        """x ``decrease`` now (the caller decided that the evidence shows overload)."""
        self.limit = max(1.0, self.limit * self.decrease)
        self._last_cut = time.monotonic()


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


class OutcomeWindow:
    """The last ``size`` outcomes of one model ("ok", "429" or "error") and the latencies of
    its successes: the evidence for overload and for the hedging delay.

    ``overloaded`` says why the model is overloaded, or None: at least ``share_429`` of the
    window's size are 429s (429s cluster: a lone 429 or a few spread out are one item's bad
    luck), or, with at least half a window of successes, their median latency is
    ``latency_climb`` times the lowest median seen (the server is queueing). 500s and other
    errors never count as overload: a failing request is not a busy server. After a cut the
    window starts afresh, so the next cut needs new evidence.
    """

    def __init__(self, size: int, share_429: float, latency_climb: float) -> None:
        self.size = size
        self.share_429 = share_429
        self.latency_climb = latency_climb
        self.outcomes: deque[str] = deque(maxlen=size)
        self.latencies: deque[float] = deque(maxlen=size)  # successes in the window
        self.tail: deque[float] = deque(maxlen=HEDGE_SAMPLES)  # successes, longer memory
        self.baseline: float | None = None  # the lowest median latency of a full window
        self.warm_at: float | None = None  # when the first success came back

    def add(
        self, outcome: str, latency_s: float | None = None, started: float | None = None
    ) -> None:
        """One outcome; a success's latency is kept unless its call went out (``started``,
        monotonic) before the model's first answer came back: that first wave also waited
        on cold starts (the connection pool, the structured-output negotiation, which sends
        one request at a time), not on the server."""
        self.outcomes.append(outcome)
        if outcome != "ok" or latency_s is None:
            return
        if self.warm_at is None:
            self.warm_at = time.monotonic()
            if started is not None:
                return
        elif started is not None and started < self.warm_at:
            return
        self.latencies.append(latency_s)
        self.tail.append(latency_s)

    def median_latency(self) -> float | None:
        if len(self.latencies) < max(2, self.size // 2):
            return None
        return statistics.median(self.latencies)

    def overloaded(self) -> str | None:
        n429 = sum(o == "429" for o in self.outcomes)
        if n429 >= max(2, self.share_429 * self.size):
            return f"{n429} of the last {len(self.outcomes)} calls were 429s"
        med = self.median_latency()
        if med is None:
            return None
        if self.baseline is None or med < self.baseline:
            self.baseline = med
            return None
        if med > self.latency_climb * self.baseline:
            return f"median latency {med:.2f}s, {med / self.baseline:.1f}x the lowest seen"
        return None

    def restart(self) -> None:
        self.outcomes.clear()
        self.latencies.clear()

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile of recent successful latencies (None below HEDGE_MIN_SAMPLES)."""
        if len(self.tail) < HEDGE_MIN_SAMPLES:
            return None
        xs = sorted(self.tail)
        return xs[min(len(xs) - 1, int(q * len(xs)))]


HEDGE_SAMPLES = 200  # successful latencies kept for the hedging quantile
HEDGE_MIN_SAMPLES = 20  # no hedging before this many successes were seen
RATE_CUT = 0.7  # the pace after 429s cluster, as a share of the pace before
RATE_RECOVERY = 0.002  # the pace grows back by this share of its cap per success


@dataclass
class LimiterStats:
    requests: int = 0
    throttled: int = 0
    holds: int = 0  # times the whole model was held (the other 429s delayed one item)
    header_updates: int = 0
    paused_s: float = 0.0
    overloads: int = 0  # cuts of concurrency (and pace, for 429s) on the outcome window
    last_overload: str | None = None  # why the last cut happened
    hedges: int = 0  # stalled requests sent a second time
    hedge_wins: int = 0  # ... where the second copy answered first


@dataclass
class ModelLimiter:
    """Everything that paces calls to one (backend, base_url, model).

    The configured ``rpm``/``tpm`` are caps: x-ratelimit-* headers may lower the pace below
    them (a smaller account tier) but never raise it (a server reporting its whole capacity
    does not know what else shares it). Without a configured cap the headers set the pace.
    """

    key: tuple[str, str, str]
    concurrency: AdaptiveConcurrency
    requests: Pacer | None
    tokens: Pacer | None
    rpm_cap: float | None = None
    tpm_cap: float | None = None
    paused_until: float = 0.0
    pace_ceiling: float | None = None  # req/s the pace grows back to after a cut
    stats: LimiterStats = field(default_factory=LimiterStats)
    slots: int | None = None  # generation slots the server reported (see probe_slots)
    vision: bool | None = None  # whether the server says its model takes images (None: silent)
    probed: bool = False
    window: OutcomeWindow = field(default_factory=lambda: OutcomeWindow(64, 0.25, 3.0))
    hedge_multiplier: float = 3.0  # hedge after this x the p95 latency (0: never) ...
    hedge_floor_s: float = 1.0  # ... and never sooner than this
    timeout_s: float = 60.0
    _probe_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def probe_slots(self, probe: Callable[[], Awaitable[int | None]]) -> None:
        """Ask the server once how many requests it generates at once and cap the
        concurrency there; items arriving meanwhile wait for the answer, not a slot."""
        if self.probed:
            return
        async with self._probe_lock:
            if self.probed:
                return
            try:
                self.slots = await probe()
            finally:
                self.probed = True
            if self.slots is not None:
                self.concurrency.cap(self.slots)

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> ModelLimiter:
        key = (spec.backend, spec.base_url or "", spec.rate_group or spec.model)
        req = Pacer(spec.rpm / 60.0) if spec.rpm else None
        tok = Pacer(spec.tpm / 60.0) if spec.tpm else None
        return cls(
            key,
            AdaptiveConcurrency(spec.max_concurrency),
            req,
            tok,
            spec.rpm,
            spec.tpm,
            window=OutcomeWindow(
                spec.overload_window, spec.overload_429_share, spec.overload_latency_climb
            ),
            pace_ceiling=spec.rpm / 60.0 if spec.rpm else None,
            hedge_multiplier=spec.hedge_multiplier,
            hedge_floor_s=spec.hedge_floor_s,
            timeout_s=spec.timeout_s,
        )

    async def acquire(self, est_tokens: int, urgent: bool = False) -> None:
        """Wait for a concurrency slot, any hold, then the request and token pacers;
        ``urgent`` (an item already under way: a retry, a hedge) goes before fresh items."""
        await self.concurrency.acquire(urgent)
        try:
            while (wait := self.paused_until - time.monotonic()) > 0:
                self.stats.paused_s += wait
                await asyncio.sleep(wait)
            if self.requests is not None:
                await self.requests.acquire(1.0, urgent)
            if self.tokens is not None:
                await self.tokens.acquire(float(est_tokens), urgent)
        except BaseException:
            await self.concurrency.release()
            raise
        self.stats.requests += 1

    async def release(self, *, est_tokens: int, used_tokens: int | None) -> None:
        if self.tokens is not None and used_tokens is not None:
            self.tokens.adjust(used_tokens - est_tokens)
        await self.concurrency.release()

    def pause(self, seconds: float) -> None:
        """Hold every new send of this model for ``seconds`` (no longer: holds do not add up),
        then resume at the even pace rather than all at once."""
        until = time.monotonic() + seconds
        self.paused_until = max(self.paused_until, until)
        for pacer in (self.requests, self.tokens):
            if pacer is not None:
                pacer.hold(until)

    def on_throttle(
        self, retry_after_s: float | None, headers: Mapping[str, str] | None = None
    ) -> bool:
        """Count a 429; hold the whole model only when 429s cluster (see ``record``).

        One 429 is evidence about one request: its item waits its Retry-After (the retry
        policy does that) and every other request goes on. A 429 whose x-ratelimit-remaining-*
        headers say nothing remains holds the model until the window's reset
        (``update_from_headers``, called for every reply). Returns whether the model was held
        for this 429's Retry-After (the window showed overload).
        """
        self.stats.throttled += 1
        return self.record("429", retry_after_s=retry_after_s)

    def record(
        self,
        outcome: str,
        latency_s: float | None = None,
        retry_after_s: float | None = None,
        started: float | None = None,
    ) -> bool:
        """One finished call ("ok", "429", "error"): feed the outcome window and, when it
        shows overload, cut the concurrency (AIMD), and for clustered 429s also the pace and
        hold the model for the Retry-After. Successes grow the pace back towards its cap."""
        self.window.add(outcome, latency_s, started)
        if outcome == "ok":
            self.concurrency.on_success()
            top = self.pace_ceiling
            if self.requests is not None and top and self.requests.rate < top:
                self.requests.set_rate(min(top, self.requests.rate + RATE_RECOVERY * top))
        if outcome == "error":
            return False
        why = self.window.overloaded()
        if why is None:
            return False
        self.stats.overloads += 1
        self.stats.last_overload = why
        self.concurrency.cut()
        self.window.restart()
        if outcome != "429":  # latency climbed: fewer in flight, same pace
            return False
        if self.requests is not None:
            self.requests.set_rate(self.requests.rate * RATE_CUT)
        if retry_after_s:
            self.stats.holds += 1
            self.pause(retry_after_s)
            return True
        return False

    def hedge_delay(self) -> float | None:
        """Seconds after which a request still unanswered is sent again: ``hedge_multiplier``
        x the p95 of recent successful latencies, at least ``hedge_floor_s`` and at most half
        the timeout (hedging later saves little over the timeout's own retry). None when
        hedging is off, too few latencies are known, the p95 itself reaches half the timeout
        (a slow server, not a stalled request), or the server reported its generation slots
        (a self-hosted server: a second copy only queues behind the first)."""
        if self.hedge_multiplier <= 0 or self.slots is not None:
            return None
        p95 = self.window.quantile(0.95)
        if p95 is None or p95 >= self.timeout_s / 2:
            return None
        return min(max(self.hedge_floor_s, self.hedge_multiplier * p95), self.timeout_s / 2)

    def update_from_headers(self, headers: Mapping[str, str]) -> None:
        """Follow x-ratelimit-* headers: lower the pace (never above the configured cap),
        hold at zero remaining until the reset."""
        h = {k.lower(): v for k, v in headers.items()}
        if not any(k.startswith("x-ratelimit-") for k in h):
            return
        self.stats.header_updates += 1
        for kind in ("requests", "tokens"):
            limit = _num(h.get(f"x-ratelimit-limit-{kind}"))
            remaining = _num(h.get(f"x-ratelimit-remaining-{kind}"))
            reset = parse_duration(h.get(f"x-ratelimit-reset-{kind}", "") or "")
            if limit:
                cap = self.rpm_cap if kind == "requests" else self.tpm_cap
                rate = (min(limit, cap) if cap else limit) / 60.0
                pacer = self.requests if kind == "requests" else self.tokens
                if pacer is None:
                    pacer = Pacer(rate)
                    if kind == "requests":
                        self.requests = pacer
                    else:
                        self.tokens = pacer
                elif kind == "tokens" and abs(pacer.rate - rate) > 1e-9:
                    pacer.set_rate(rate)
                elif kind == "requests" and (
                    self.pace_ceiling is None or abs(self.pace_ceiling - rate) > 1e-9
                ):  # a new limit; the same one again leaves a cut pace to grow back
                    pacer.set_rate(rate)
                if kind == "requests":
                    self.pace_ceiling = rate
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
