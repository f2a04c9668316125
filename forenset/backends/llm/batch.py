"""Batch mode (OpenAI Batch API, Gemini inlined batches): submit once, poll, collect.

Item ids are the custom ids (OpenAI ``custom_id``, Gemini ``metadata.key``). The batch id
goes into the run-store ledger right after submission, so a restarted stage polls the
batch it already paid for instead of resubmitting. An expired batch yields its partial
output; only the ids still missing go into a new batch. Answers land in the response cache
as they are collected. Replies that fail validation get the normal online repair turn.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import openai
from google.genai import errors as genai_errors
from google.genai import types as gtypes
from openai.types.chat import ChatCompletion

from forenset.backends.llm.base import RawReply, Turns
from forenset.backends.llm.cache import ResponseCache
from forenset.backends.llm.gemini_chat import build_config, build_contents, reply_from_response
from forenset.backends.llm.jsonout import parse_reply, repair_message
from forenset.backends.llm.ledger import BatchLedger
from forenset.backends.llm.openai_chat import build_body, reply_from_completion
from forenset.backends.llm.registry import Backends
from forenset.backends.llm.secrets import redact
from forenset.backends.llm.state import StageState, _Item
from forenset.backends.llm.types import ChatResult, LLMCallError, LLMSettings, ModelSpec
from forenset.backends.retry import error_from_status


class Engine(Protocol):
    """What batch mode uses of ``engine.Engine`` (which imports this module lazily, so it is
    named by this protocol rather than imported back)."""

    backends: Backends

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
    ) -> ChatResult: ...

    async def from_cache(
        self, item: _Item, cache: ResponseCache | None, state: StageState
    ) -> ChatResult | None: ...

    async def store(
        self, item: _Item, cache: ResponseCache | None, raw: RawReply, batch_id: str | None = None
    ) -> None: ...

    def finish(
        self,
        result: ChatResult,
        state: StageState,
        settings: LLMSettings,
        stage: str,
        *,
        server_failure: bool = False,
        systemic: bool = False,
    ) -> ChatResult: ...

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
    ) -> ChatResult: ...

    def charge(self, item: _Item, state: StageState, raw: RawReply, *, batch: bool) -> None: ...


ENDPOINT = "/v1/chat/completions"
BATCH_BACKENDS = ("openai", "gemini")
_GEMINI_STATES = {
    "JOB_STATE_SUCCEEDED": "completed",
    "JOB_STATE_EXPIRED": "expired",
    "JOB_STATE_FAILED": "failed",
    "JOB_STATE_CANCELLED": "cancelled",
}


def group_key(stage: str, spec: ModelSpec, keys: list[str]) -> str:
    """Identity of one shard's batch work: stage, model and the items' cache keys."""
    blob = json.dumps([stage, spec.backend, spec.base_url, spec.model, sorted(keys)])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


@dataclass
class Polled:
    """One poll: normalised status (running/completed/expired/failed/cancelled) + rows."""

    status: str
    rows: list[tuple[str, RawReply | LLMCallError]] = field(default_factory=list)
    why: str = ""


class _OpenAIJobs:
    def __init__(self, eng: Engine, spec: ModelSpec) -> None:
        self.spec = spec
        self.client = eng.backends["openai"].client(spec)

    async def submit(self, group: str, items: dict[str, _Item]) -> tuple[str, str]:
        lines = [
            json.dumps(
                {
                    "custom_id": cid,
                    "method": "POST",
                    "url": ENDPOINT,
                    "body": build_body(self.spec, item.req, []),
                }
            )
            for cid, item in items.items()
        ]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        f = await self.client.files.create(file=("batch.jsonl", data), purpose="batch")
        batch = await self.client.batches.create(
            input_file_id=f.id,
            endpoint=ENDPOINT,
            completion_window="24h",
            metadata={"forenset_group": group},
        )
        return batch.id, f.id

    async def poll(self, batch_id: str) -> Polled:
        batch = await self.client.batches.retrieve(batch_id)
        if batch.status not in ("completed", "expired", "failed", "cancelled"):
            return Polled("running")
        out = Polled(str(batch.status))
        for fid in (batch.output_file_id, batch.error_file_id):
            if fid:
                content = await self.client.files.content(fid)
                out.rows += self.rows(content.content)
        if batch.errors and batch.errors.data:
            out.why = "; ".join(str(e.message) for e in batch.errors.data[:3])
        return out

    @staticmethod
    def rows(data: bytes) -> list[tuple[str, RawReply | LLMCallError]]:
        rows: list[tuple[str, RawReply | LLMCallError]] = []
        for line in data.decode("utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            resp = row.get("response") or {}
            body = resp.get("body") or {}
            status = int(resp.get("status_code") or 0)
            try:
                if status != 200:
                    err = body.get("error") or row.get("error") or {}
                    raise error_from_status(
                        status or 500, str(err.get("message", "")), err.get("code"), {}
                    )
                value: RawReply | LLMCallError = reply_from_completion(
                    ChatCompletion.model_validate(body), {}
                )
            except LLMCallError as exc:
                value = exc
            rows.append((str(row.get("custom_id", "")), value))
        return rows


class _GeminiJobs:
    def __init__(self, eng: Engine, spec: ModelSpec) -> None:
        self.spec = spec
        self.client = eng.backends["gemini"].client(spec)

    async def submit(self, group: str, items: dict[str, _Item]) -> tuple[str, str]:
        src = [
            gtypes.InlinedRequest(
                model=self.spec.model,
                contents=build_contents(item.req, []),
                config=build_config(self.spec, item.req),
                metadata={"key": cid},
            )
            for cid, item in items.items()
        ]
        job = await self.client.aio.batches.create(
            model=self.spec.model, src=src, config={"display_name": f"forenset-{group}"}
        )
        return str(job.name), ""

    async def poll(self, batch_id: str) -> Polled:
        job = await self.client.aio.batches.get(name=batch_id)
        state = job.state.value if job.state else ""
        status = _GEMINI_STATES.get(state)
        if status is None:
            return Polled("running")
        out = Polled(status, why=str(job.error.message) if job.error else "")
        for r in (job.dest.inlined_responses or []) if job.dest else []:
            cid = str((r.metadata or {}).get("key", ""))
            try:
                if r.error is not None:
                    raise error_from_status(
                        int(r.error.code or 500), str(r.error.message or ""), None, {}
                    )
                value: RawReply | LLMCallError = reply_from_response(r.response, {})
            except LLMCallError as exc:
                value = exc
            out.rows.append((cid, value))
        return out


class _Group:
    """One pool model's batch items of one run_chat call."""

    def __init__(
        self,
        eng: Engine,
        spec: ModelSpec,
        settings: LLMSettings,
        state: StageState,
        stage: str,
        build_seed: int,
        cache: ResponseCache,
        results: list[ChatResult | None],
    ) -> None:
        self.eng, self.spec, self.settings, self.state = eng, spec, settings, state
        self.stage, self.build_seed, self.cache, self.results = stage, build_seed, cache, results
        self.ledger = BatchLedger(cache.fs, cache.root)
        self.pending: dict[str, tuple[int, _Item]] = {}
        jobs_cls = _OpenAIJobs if spec.backend == "openai" else _GeminiJobs
        self.jobs = jobs_cls(eng, spec)

    def set_result(self, i: int, res: ChatResult) -> None:
        self.results[i] = self.eng.finish(res, self.state, self.settings, self.stage)

    def fail_pending(self, reason: str, *, retryable: bool, batch_id: str | None) -> None:
        for i, item in self.pending.values():
            self.set_result(
                i,
                self.eng.result(
                    item, status="error", error=reason, retryable=retryable, batch_id=batch_id
                ),
            )
        self.pending.clear()

    async def submit(self, group: str) -> str:
        batch_id, input_file = await self.jobs.submit(
            group, {cid: item for cid, (_, item) in self.pending.items()}
        )
        await asyncio.to_thread(
            self.ledger.append,
            {
                "event": "submitted",
                "group": group,
                "batch_id": batch_id,
                "stage": self.stage,
                "backend": self.spec.backend,
                "model": self.spec.model,
                "custom_ids": sorted(self.pending),
                "input_file_id": input_file,
            },
        )
        for _, item in self.pending.values():
            item.attempts += 1
        return batch_id

    async def poll(self, group: str, batch_id: str) -> str:
        """Wait for a terminal status (or the wait limit) and collect what it produced."""
        waited = 0.0
        while (polled := await self.jobs.poll(batch_id)).status == "running":
            if waited >= self.spec.batch_wait_s:
                return "waiting"
            await asyncio.sleep(self.spec.batch_poll_s)
            waited += self.spec.batch_poll_s
        await asyncio.to_thread(
            self.ledger.append,
            {"event": "status", "group": group, "batch_id": batch_id, "status": polled.status},
        )
        await self.collect(polled.rows, batch_id)
        if polled.status in ("failed", "cancelled"):
            self.fail_pending(
                f"batch {batch_id} {polled.status}: {polled.why or 'no reason given'}",
                retryable=False,
                batch_id=batch_id,
            )
        await asyncio.to_thread(
            self.ledger.append, {"event": "collected", "group": group, "batch_id": batch_id}
        )
        return polled.status

    async def collect(self, rows: list[tuple[str, RawReply | LLMCallError]], batch_id: str) -> None:
        repairs: list[tuple[int, _Item, list[tuple[str, str]]]] = []
        for cid, value in rows:
            entry = self.pending.pop(cid, None)
            if entry is None:
                continue
            i, item = entry
            if isinstance(value, LLMCallError):
                self.set_result(
                    i,
                    self.eng.result(
                        item,
                        status="error",
                        error=value.reason,
                        retryable=value.retryable,
                        batch_id=batch_id,
                    ),
                )
                continue
            self.eng.charge(item, self.state, value, batch=True)
            self.state.calls += 1
            parsed, perr = parse_reply(value.text, item.req.response_model)
            if perr is None:
                await self.eng.store(item, self.cache, value, batch_id)
                self.set_result(
                    i,
                    self.eng.result(
                        item, status="ok", text=value.text, parsed=parsed, batch_id=batch_id
                    ),
                )
            elif self.settings.repair_retries > 0:
                repairs.append(
                    (i, item, [("assistant", value.text), ("user", repair_message(perr))])
                )
            else:
                self.set_result(
                    i,
                    self.eng.result(
                        item, status="error", text=value.text, error=perr, batch_id=batch_id
                    ),
                )

        async def repair(i: int, item: _Item, extra: list[tuple[str, str]]) -> None:
            item.spec = item.spec.model_copy(update={"batch": False})
            self.results[i] = await self.eng.run_item(
                item,
                self.settings,
                self.state,
                self.stage,
                self.build_seed,
                self.cache,
                extra=extra,
                repairs_used=1,
            )

        await asyncio.gather(*(repair(*r) for r in repairs))


async def run_batch_group(
    eng: Engine,
    spec: ModelSpec,
    items: list[_Item],
    idx: list[int],
    results: list[ChatResult | None],
    settings: LLMSettings,
    state: StageState,
    stage: str,
    build_seed: int,
    cache: ResponseCache | None,
) -> None:
    """Fill ``results[idx]`` for one pool model's batch items (errors as rows)."""
    if cache is None:
        for i, item in zip(idx, items, strict=True):
            results[i] = eng.result(
                item,
                status="error",
                retryable=False,
                error="batch mode needs a run store (cache=None)",
            )
        return
    ids = [it.req.item_id for it in items]
    if len(set(ids)) != len(ids):
        raise ValueError("batch mode needs unique item_id values within one run_chat call")
    group = group_key(stage, spec, [it.key for it in items])
    try:
        g = _Group(eng, spec, settings, state, stage, build_seed, cache, results)
    except LLMCallError as exc:  # e.g. the key's env var is not set
        for i, item in zip(idx, items, strict=True):
            results[i] = eng.result(item, status="error", error=exc.reason, retryable=False)
        return
    for i, item in zip(idx, items, strict=True):
        hit = await eng.from_cache(item, cache, state)
        if hit is not None:
            results[i] = hit
        else:
            g.pending[item.req.item_id] = (i, item)
    batch_id: str | None = None
    status = ""
    try:
        known = await asyncio.to_thread(g.ledger.batches_for, group)
        for rec in known:  # a restart: poll what was already submitted and paid for
            if g.pending and not rec.get("collected") and set(rec["custom_ids"]) & set(g.pending):
                batch_id = rec["batch_id"]
                status = await g.poll(group, batch_id)
                if status == "waiting":
                    break
        while g.pending and status != "waiting":
            if settings.budget_usd is not None and state.spent_usd >= settings.budget_usd:
                g.fail_pending("budget exhausted", retryable=True, batch_id=None)
                break
            batch_id = await g.submit(group)
            status = await g.poll(group, batch_id)
            if status != "expired":
                break
    except (openai.APIError, genai_errors.APIError) as exc:
        g.fail_pending(
            f"batch API error: {redact(str(exc))[:300]}", retryable=True, batch_id=batch_id
        )
        return
    if g.pending and status == "waiting":
        g.fail_pending(
            f"batch {batch_id} not finished yet; run again to collect it",
            retryable=True,
            batch_id=batch_id,
        )
    elif g.pending:
        g.fail_pending(
            f"batch {batch_id} ({status}) returned no answer for this item",
            retryable=True,
            batch_id=batch_id,
        )
