"""run_chat: the synchronous entry the stages call, over one process-wide event loop.

Why one background loop: limiters, SDK clients (connection pools) and stage guards must be
shared by every shard of the process, and stage shards call us from several Prefect worker
threads at once. asyncio primitives and httpx pools are bound to one loop, so the process
owns exactly one loop in a daemon thread (forenset/backends/apiloop.py, shared with the image
API clients); run_chat submits a coroutine to it and blocks its own thread on the result. No
cross-thread locks are needed on the hot path. One attempt and its retries follow the rules of
forenset/backends/retry.py, also shared with the image clients.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Literal, TypeVar

from forenset.backends import apiloop
from forenset.backends.llm.base import RawReply, Turns
from forenset.backends.llm.cache import ResponseCache, cache_key
from forenset.backends.llm.jsonout import parse_reply, repair_message
from forenset.backends.llm.limits import ModelLimiter, estimate_tokens
from forenset.backends.llm.pool import choose_model, fallback_model
from forenset.backends.llm.registry import Backends
from forenset.backends.llm.secrets import redact
from forenset.backends.llm.state import StageState, _Item
from forenset.backends.llm.types import (
    DEFAULT_MAX_TOKENS,
    ChatRequest,
    ChatResult,
    LLMSettings,
    ModelSpec,
)
from forenset.backends.retry import Attempt, RetryPolicy, attempt, cannot_see, hedged
from forenset.seeds import derive_seed

log = logging.getLogger("forenset.llm")
T = TypeVar("T")

BUDGET_EXHAUSTED = "budget exhausted"


def call_cost(spec: ModelSpec, input_tokens: int, output_tokens: int, *, batch: bool) -> float:
    """USD for one call from per-1M-token prices (batch calls at the batch price factor)."""
    usd = (input_tokens * spec.price_in_per_mtok + output_tokens * spec.price_out_per_mtok) / 1e6
    return usd * (spec.batch_price_factor if batch else 1.0)


class Engine:
    """Owns the chat backends and stage states of the process (on the shared API loop)."""

    def __init__(self) -> None:
        # built on first use from the chat-backend registry (built-ins and plugins)
        self.backends = Backends()
        self.stages: dict[tuple[str, int], StageState] = {}

    def submit(self, coro: Coroutine[Any, Any, T]) -> T:
        return apiloop.submit(coro)

    # -- registries (touched on the loop thread only) ---------------------------------
    def limiter_for(self, spec: ModelSpec) -> ModelLimiter:
        return apiloop.limiter_for(spec)

    def stage_state(self, stage: str, build_seed: int, settings: LLMSettings) -> StageState:
        key = (stage, build_seed)
        if key not in self.stages:
            self.stages[key] = StageState(window=deque(maxlen=settings.error_window))
        return self.stages[key]

    # -- one stage call ---------------------------------------------------------------
    async def run_all(
        self,
        requests: list[ChatRequest],
        settings: LLMSettings,
        build_seed: int,
        stage: str,
        cache: ResponseCache | None,
    ) -> list[ChatResult]:
        state = self.stage_state(stage, build_seed, settings)
        if state.aborted:
            state.raise_aborted()
        requests = [
            dataclasses.replace(r, max_tokens=settings.max_tokens)
            if settings.max_tokens is not None
            else r
            if r.max_tokens is not None
            else dataclasses.replace(r, max_tokens=DEFAULT_MAX_TOKENS)
            for r in requests
        ]
        items = [
            self.make_item(r, choose_model(settings.pool, build_seed, stage, r.item_id))
            for r in requests
        ]
        results: list[ChatResult | None] = [None] * len(items)

        async def one(i: int) -> None:
            results[i] = await self.run_item(items[i], settings, state, stage, build_seed, cache)

        jobs: list[Coroutine[Any, Any, None]] = []
        groups: dict[tuple[str, str | None, str], list[int]] = {}
        batch_backends: tuple[str, ...] = ()
        if any(item.spec.batch for item in items):  # batch.py loads both SDKs (~1-2 s)
            from forenset.backends.llm.batch import BATCH_BACKENDS, run_batch_group

            batch_backends = tuple(BATCH_BACKENDS)
        for i, item in enumerate(items):
            if item.spec.batch and item.spec.backend in batch_backends:
                spec_key = (item.spec.backend, item.spec.base_url, item.spec.model)
                groups.setdefault(spec_key, []).append(i)
            else:
                jobs.append(one(i))
        for idx in groups.values():
            jobs.append(
                run_batch_group(
                    self,
                    items[idx[0]].spec,
                    [items[i] for i in idx],
                    idx,
                    results,
                    settings,
                    state,
                    stage,
                    build_seed,
                    cache,
                )
            )
        await asyncio.gather(*jobs)
        done = [r for r in results if r is not None and not r.cached]
        if (
            not state.aborted
            and len(done) >= min(2, settings.fail_fast_after)
            and state.ok == 0
            and state.same_error is not None
            and all(r.error == state.same_error for r in done)
        ):  # a stage smaller than fail_fast_after whose every call failed alike
            self.abort_same(state, stage, done[-1], state.same_count)
        if state.aborted:
            state.raise_aborted()
        missing = [items[i].req.item_id for i, r in enumerate(results) if r is None]
        if missing:  # a bug, not a provider error: fail loudly rather than misalign rows
            raise RuntimeError(f"run_chat produced no result for items {missing[:5]}")
        return results  # type: ignore[return-value]

    def make_item(self, req: ChatRequest, spec: ModelSpec) -> _Item:
        key = "" if spec.backend == "offline" else cache_key(spec, req)
        return _Item(req=req, spec=spec, key=key)

    def result(
        self,
        item: _Item,
        *,
        status: Literal["ok", "error"],
        text: str = "",
        parsed: Any = None,
        error: str | None = None,
        retryable: bool = False,
        cached: bool = False,
        batch_id: str | None = None,
    ) -> ChatResult:
        r = item.req
        return ChatResult(
            item_id=r.item_id,
            status=status,
            parsed=parsed,
            text=text,
            error=redact(error) if error else None,
            retryable=retryable,
            backend=item.spec.backend,
            model=item.spec.model,
            input_tokens=item.input_tokens,
            output_tokens=item.output_tokens,
            cost_usd=item.cost_usd,
            latency_s=time.monotonic() - item.t0,
            cached=cached,
            attempts=item.attempts,
            task=r.task,
            prompt_id=r.prompt_id,
            prompt_hash=r.prompt_hash,
            cache_key=item.key,
            batch_id=batch_id,
            refused_by=item.refused_by,
            output_mode=item.output_mode,
            regenerations=item.regenerations,
        )

    async def from_cache(
        self, item: _Item, cache: ResponseCache | None, state: StageState
    ) -> ChatResult | None:
        if cache is None or not item.key:
            return None
        entry = await asyncio.to_thread(cache.get, item.key)
        if entry is None:
            return None
        parsed, err = parse_reply(entry.get("text", ""), item.req.response_model)
        if err is not None:
            return None  # cached under an older output model: call again
        item.input_tokens = int(entry.get("input_tokens", 0))
        item.output_tokens = int(entry.get("output_tokens", 0))
        item.output_mode = entry.get("output_mode")
        state.cached += 1
        return self.result(item, status="ok", text=entry["text"], parsed=parsed, cached=True)

    async def store(
        self, item: _Item, cache: ResponseCache | None, raw: RawReply, batch_id: str | None = None
    ) -> None:
        if cache is None or not item.key:
            return
        entry = {
            "backend": item.spec.backend,
            "model": item.spec.model,
            "text": raw.text,
            "input_tokens": raw.input_tokens,
            "output_tokens": raw.output_tokens,
            "task": item.req.task,
            "prompt_id": item.req.prompt_id,
            "batch_id": batch_id,
            "output_mode": raw.output_mode,
            "created": time.time(),
        }
        try:
            await asyncio.to_thread(cache.put, item.key, entry)
        except OSError as exc:  # the answer is still returned; only the reuse is lost
            log.warning("could not write LLM cache entry %s: %s", item.key, exc)

    def abort_same(
        self, state: StageState, stage: str, result: ChatResult, n: int, base_url: str | None = None
    ) -> None:
        """Stop the stage (and the build): its every call so far failed the same way. The
        message names the server (``base_url``) the user must fix; the build's caller reports
        it (the CLI once), so it is logged at debug level only."""
        reason = (result.error or "").rstrip(".")[:240]
        at = f" at {redact(base_url)}" if base_url else ""
        state.fatal = True
        state.aborted = (
            f"Stage '{stage}' stopped because all {n} of its model calls to {result.backend}/"
            f"{result.model}{at} failed the same way ({reason}); fix the server or the model "
            "settings and rerun."
        )
        log.debug(state.aborted)

    def abort_blind(self, state: StageState, stage: str, spec: ModelSpec, why: str) -> None:
        """Stop the stage (and the build) at once: it sends images to a model that cannot
        take them, so every one of its requests would fail alike."""
        if state.aborted:
            return
        why = why.replace(". ", "; ").rstrip(".")[:200]
        where = f" at {spec.base_url}" if spec.base_url else ""
        state.fatal = state.blind = True
        state.aborted = (
            f"Stage '{stage}' sends images, but the model {spec.label}{where} cannot take "
            f"them ({why}); give the stage a vision model in its llm.pool."
        )
        log.error(state.aborted)

    def finish(
        self,
        result: ChatResult,
        state: StageState,
        settings: LLMSettings,
        stage: str,
        *,
        server_failure: bool = False,
        systemic: bool = False,
    ) -> ChatResult:
        """Feed the sliding error window and the same-failure guard; set the stage's abort
        message when either trips. ``server_failure``: the call failed at the transport or
        server, not on the reply's content; ``systemic``: in a way that does not depend on
        the item (a rejected request form, a wrong key or model, no connection), so
        ``fail_fast_after`` alike with no success stop the stage before its shard ends."""
        if result.cached or result.error in (BUDGET_EXHAUSTED,) or state.aborted:
            return result
        if result.ok:
            state.ok += 1
        elif server_failure and state.ok == 0:
            if result.error == state.same_error:
                state.same_count += 1
            else:
                state.same_error, state.same_count = result.error, 1
            if systemic and state.same_count >= settings.fail_fast_after:
                url = next(
                    (
                        m.base_url
                        for m in settings.pool
                        if m.backend == result.backend and m.model == result.model
                    ),
                    None,
                )
                self.abort_same(state, stage, result, state.same_count, url)
                return result
        failed = result.status == "error"
        state.errors += failed
        state.window.append(failed)
        n, k = len(state.window), sum(state.window)
        if n >= settings.error_window and k / n > settings.max_error_rate and not state.aborted:
            reason = (result.error or "").replace(". ", "; ").rstrip(".")[:200]
            state.aborted = (
                f"Stage '{stage}' stopped because {k} of its last {n} model calls failed "
                f"(limit {settings.max_error_rate:.0%}), the last on {result.backend}/"
                f"{result.model} with: {reason}."
            )
            log.error(state.aborted)
        return result

    async def run_item(
        self,
        item: _Item,
        settings: LLMSettings,
        state: StageState,
        stage: str,
        build_seed: int,
        cache: ResponseCache | None,
        extra: Turns | None = None,
        repairs_used: int = 0,
    ) -> ChatResult:
        """Cache, budget, limiter, retries with backoff, one repair turn, and one try on
        another pool model after a refusal (recorded as ``refused_by``); never raises."""
        hit = await self.from_cache(item, cache, state)
        if hit is not None:
            return hit
        spec, req = item.spec, item.req
        backend = self.backends[spec.backend]
        limiter = self.limiter_for(spec) if spec.backend != "offline" else None
        rng = random.Random(derive_seed(build_seed, stage, req.item_id, "backoff"))
        policy = RetryPolicy(settings.max_retries, settings.backoff_base_s, settings.backoff_max_s)
        extra = list(extra or [])
        retries = 0
        while True:
            if limiter is not None:
                await self.probe_slots(spec, limiter)
            if not state.aborted and req.images and limiter is not None and limiter.vision is False:
                self.abort_blind(state, stage, spec, "its server reports no vision modality")
            if state.aborted:
                return self.result(
                    item, status="error", error="stage aborted: error rate", retryable=True
                )
            est = estimate_tokens(req.system + req.user, len(req.images), req.max_tokens)
            est_out = req.max_tokens or 256
            est_cost = call_cost(spec, est - est_out, est_out, batch=False)
            budget = settings.budget_usd
            if budget is not None and state.spent_usd + state.reserved_usd + est_cost > budget:
                return self.result(item, status="error", error=BUDGET_EXHAUSTED, retryable=True)
            state.reserved_usd += est_cost
            item.attempts += 1
            try:
                if limiter is not None and spec.prefect_rate_limit:
                    await _prefect_slot(spec.prefect_rate_limit)
                send = functools.partial(
                    attempt,
                    functools.partial(backend.complete, spec, req, extra),
                    limiter,
                    est_tokens=est,
                    used_tokens=lambda raw: raw.input_tokens + raw.output_tokens,
                    # stopped while this item queued for a slot
                    still_wanted=lambda: not state.aborted,
                    log=log,
                    label=spec.label,
                )
                # an item's later attempts go before fresh items: its Retry-After was its
                # wait, not a place at the back of the stage's queue
                sent = await self.hedged(send, limiter, spec, req.item_id, item.attempts > 1)
            finally:
                state.reserved_usd -= est_cost
            if sent.skipped:
                item.attempts -= 1
                return self.result(
                    item, status="error", retryable=True, error="stage aborted: error rate"
                )
            state.calls += 1
            failure = sent.failure
            if (
                failure is not None
                and failure.refused
                and self.regenerate(item, settings, stage, build_seed)
            ):
                req = item.req
                continue
            if failure is not None and failure.refused and item.refused_by is None:
                other = fallback_model(settings.pool, spec, build_seed, stage, req.item_id)
                if other is not None:
                    log.info("%s refused item %s; trying %s", spec.label, req.item_id, other.label)
                    item.refused_by, item.spec = spec.label, other
                    item.key = self.make_item(req, other).key
                    hit = await self.from_cache(item, cache, state)
                    if hit is not None:
                        return hit
                    spec, backend = other, self.backends[other.backend]
                    limiter = self.limiter_for(other) if other.backend != "offline" else None
                    continue
            if failure is not None and req.images and cannot_see(failure):
                self.abort_blind(
                    state, stage, spec, f"it answered image parts with {failure.reason}"
                )
                return self.result(item, status="error", error=failure.reason)
            if failure is not None:
                if await policy.wait_to_retry(failure, retries, rng):
                    retries += 1
                    continue
                res = self.result(
                    item, status="error", error=failure.reason, retryable=failure.retryable
                )
                server = not failure.refused
                systemic = (
                    failure.rejected
                    or failure.status in (401, 403, 404)
                    or failure.reason.startswith("connection error")
                )
                return self.finish(
                    res, state, settings, stage, server_failure=server, systemic=systemic
                )
            raw = sent.reply
            assert raw is not None
            self.charge(item, state, raw, batch=False)
            item.output_mode = raw.output_mode or item.output_mode
            parsed, perr = parse_reply(raw.text, req.response_model)
            cut = raw.finish_reason == "length"
            if perr is None and not (cut and req.response_model is None):
                await self.store(item, cache, raw)
                res = self.result(item, status="ok", text=raw.text, parsed=parsed)
                return self.finish(res, state, settings, stage)
            if cut and item.grown < 1:  # once more, asked to be brief, with more room
                item.grown += 1
                was = int(req.max_tokens or DEFAULT_MAX_TOKENS)
                room = max(int(was * settings.length_growth), 1)
                user = req.user + brevity_note(was, req.response_model is not None)
                req = item.req = dataclasses.replace(req, max_tokens=room, user=user)
                item.key = self.make_item(req, spec).key
                log.info(
                    "%s cut item %s at max_tokens=%d; asked again to be brief, room %d",
                    spec.label,
                    req.item_id,
                    was,
                    room,
                )
                continue
            if not cut and perr is not None and repairs_used < settings.repair_retries:
                repairs_used += 1
                extra = [*extra, ("assistant", raw.text), ("user", repair_message(perr))]
                continue
            if self.regenerate(item, settings, stage, build_seed):
                req, extra = item.req, []  # the repair turns stay spent
                continue
            if cut:
                perr = (
                    f"reply cut at max_tokens={req.max_tokens} (finish_reason length), also "
                    f"after one retry asking for a brief reply with {settings.length_growth:g}x "
                    "the room; raise the stage's llm.max_tokens"
                )
            res = self.result(item, status="error", text=raw.text, error=perr, retryable=False)
            return self.finish(res, state, settings, stage)

    async def hedged(
        self,
        send: Callable[..., Awaitable[Attempt[RawReply]]],
        limiter: ModelLimiter | None,
        spec: ModelSpec,
        item_id: str,
        urgent: bool = False,
    ) -> Attempt[RawReply]:
        """One attempt, hedged after the model's observed latency tail (see
        ``ModelLimiter.hedge_delay``); hedges and hedge wins are counted on the limiter. The
        hedge copy is urgent (its item is already late)."""
        if limiter is None:
            return await send(urgent=urgent)
        lim = limiter
        urgency = iter([urgent])  # the first copy as asked, any hedge copy urgent

        def run(started: asyncio.Event) -> Awaitable[Attempt[RawReply]]:
            return send(started=started, urgent=next(urgency, True))

        def fired() -> None:
            lim.stats.hedges += 1
            log.info("%s: item %s unanswered after the latency tail; hedged", spec.label, item_id)

        def won() -> None:
            lim.stats.hedge_wins += 1

        never = lim.hedge_multiplier <= 0 or lim.slots is not None
        return await hedged(run, None if never else lim.hedge_delay, fired, won)

    async def probe_slots(self, spec: ModelSpec, limiter: ModelLimiter) -> None:
        """Once per limiter: cap its concurrency at the server's generation slots when a
        self-hosted server reports them (a serial local server: one in flight, so none of
        our requests queues there to time out and be abandoned)."""
        if limiter.probed:
            return
        slots = getattr(self.backends[spec.backend], "slots", None)
        if slots is None or not spec.base_url or not spec.detect_slots:
            limiter.probed = True
            return
        await limiter.probe_slots(lambda: slots(spec))
        said = getattr(self.backends[spec.backend], "vision", {})
        limiter.vision = said.get(spec.base_url) if isinstance(said, dict) else None
        if limiter.slots is not None:
            log.info(
                "%s at %s generates %d request(s) at once: at most %d in flight",
                spec.label,
                spec.base_url,
                limiter.slots,
                int(limiter.concurrency.maximum),
            )

    def regenerate(self, item: _Item, settings: LLMSettings, stage: str, build_seed: int) -> bool:
        """Ask the same model again with a new seed (a refusal or a cut / broken reply at
        temperature > 0 is often transient), while ``settings.regenerations`` allows; the
        count is recorded in the row."""
        if item.regenerations >= settings.regenerations:
            return False
        item.regenerations += 1
        req = item.req
        seed = derive_seed(build_seed, stage, req.item_id, "regenerate-same", item.regenerations)
        item.req = dataclasses.replace(req, seed=seed)
        item.key = self.make_item(item.req, item.spec).key
        log.info("%s: regenerating item %s (%d)", item.spec.label, req.item_id, item.regenerations)
        return True

    def charge(self, item: _Item, state: StageState, raw: RawReply, *, batch: bool) -> None:
        cost = call_cost(item.spec, raw.input_tokens, raw.output_tokens, batch=batch)
        item.input_tokens += raw.input_tokens
        item.output_tokens += raw.output_tokens
        item.cost_usd += cost
        state.input_tokens += raw.input_tokens
        state.output_tokens += raw.output_tokens
        state.spent_usd += cost


def brevity_note(cut_at: int, structured: bool) -> str:
    """What a request cut at ``cut_at`` tokens adds to its prompt when asked again: a model
    that rambled once rambles again with more room unless told to be brief."""
    end = "and close the JSON object" if structured else "and finish your last sentence"
    return (
        f"\n\nYour previous reply ran past {cut_at} tokens and was cut off. Answer again, "
        f"briefly: keep every field short, add nothing that was not asked for, {end}."
    )


async def _prefect_slot(name: str) -> None:
    """Take one slot of a Prefect global rate limit (shared by every worker of a cluster).

    Prefect being unreachable must not crash a shard: it is logged and the local limiter
    alone paces the call.
    """
    from prefect.concurrency.asyncio import rate_limit

    try:
        await rate_limit(name, occupy=1)
    except Exception as exc:
        log.warning("Prefect rate limit %r unavailable, pacing locally only: %s", name, exc)


_ENGINE: Engine | None = None
_ENGINE_LOCK = threading.Lock()


def engine() -> Engine:
    """The process-wide engine, started on first use."""
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            _ENGINE = Engine()
        return _ENGINE


def run_chat(
    requests: list[ChatRequest],
    settings: LLMSettings,
    *,
    build_seed: int,
    stage: str,
    cache: ResponseCache | None,
) -> list[ChatResult]:
    """Run one shard's requests; results in input order, errors as rows.

    A model is picked per item from ``settings.pool`` with an RNG seeded by (build seed,
    stage, item id). Raises ErrorRateExceeded when the stage's error window overflows
    (then later calls for the same stage raise at once). Safe from many threads.
    """
    if not requests:
        return []
    eng = engine()
    return eng.submit(eng.run_all(requests, settings, build_seed, stage, cache))


def stage_usage(stage: str, build_seed: int) -> dict[str, Any]:
    """Tokens, USD, calls, cache hits and errors this process spent on a stage so far."""
    eng = engine()

    async def read() -> dict[str, Any]:
        st = eng.stages.get((stage, build_seed))
        return st.snapshot() if st else StageState(window=deque()).snapshot()

    return eng.submit(read())


def reset_stage(stage: str, build_seed: int) -> None:
    """Forget a stage's error window, abort flag and spend (e.g. before a fresh run)."""
    eng = engine()

    async def drop() -> None:
        eng.stages.pop((stage, build_seed), None)

    eng.submit(drop())


def reset_limiters() -> None:
    """Forget every learned limit and pause (tests; a new provider account in one process)."""
    apiloop.reset_limiters()


def limiter_stats(spec: ModelSpec) -> dict[str, Any]:
    """Live limiter numbers for one model: requests, throttles, current concurrency."""
    eng = engine()

    async def read() -> dict[str, Any]:
        lim = eng.limiter_for(spec)
        return {
            "requests": lim.stats.requests,
            "throttled": lim.stats.throttled,
            "holds": lim.stats.holds,
            "paused_s": lim.stats.paused_s,
            "overloads": lim.stats.overloads,
            "last_overload": lim.stats.last_overload,
            "hedges": lim.stats.hedges,
            "hedge_wins": lim.stats.hedge_wins,
            "latency_p95": lim.window.quantile(0.95),
            "hedge_delay": lim.hedge_delay(),
            "header_updates": lim.stats.header_updates,
            "concurrency_limit": lim.concurrency.limit,
            "rpm": lim.requests.rate * 60 if lim.requests else None,
        }

    return eng.submit(read())
