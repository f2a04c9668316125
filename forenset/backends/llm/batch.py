"""OpenAI Batch API mode: JSONL with item ids as custom ids, upload, submit, poll, collect.

The batch id goes into the run-store ledger right after submission, so a restarted stage
polls the batch it already paid for instead of resubmitting. An expired batch yields its
partial output; only the ids still missing go into a new batch. Answers land in the
response cache as they are collected. Replies that fail validation get the normal online
repair turn.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import TYPE_CHECKING, Any

import openai
from openai.types.chat import ChatCompletion

from forenset.backends.llm.cache import ResponseCache
from forenset.backends.llm.jsonout import parse_reply, repair_message
from forenset.backends.llm.ledger import BatchLedger
from forenset.backends.llm.openai_chat import build_body, error_from_status, reply_from_completion
from forenset.backends.llm.secrets import redact
from forenset.backends.llm.types import ChatResult, LLMCallError, LLMSettings, ModelSpec

if TYPE_CHECKING:
    from forenset.backends.llm.engine import Engine, StageState, _Item

_TERMINAL = {"completed", "expired", "failed", "cancelled"}
ENDPOINT = "/v1/chat/completions"


def group_key(stage: str, spec: ModelSpec, keys: list[str]) -> str:
    """Identity of one shard's batch work: stage, model and the items' cache keys."""
    blob = json.dumps([stage, spec.backend, spec.base_url, spec.model, sorted(keys)])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


class _Group:
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
        self.client = eng.backends["openai"].client(spec)  # type: ignore[attr-defined]

    def fail_pending(self, reason: str, *, retryable: bool, batch_id: str | None) -> None:
        for i, item in self.pending.values():
            res = self.eng.result(
                item, status="error", error=reason, retryable=retryable, batch_id=batch_id
            )
            self.results[i] = self.eng.finish(res, self.state, self.settings, self.stage)
        self.pending.clear()

    async def submit(self, group: str) -> str:
        lines = [
            json.dumps(
                {
                    "custom_id": cid,
                    "method": "POST",
                    "url": ENDPOINT,
                    "body": build_body(self.spec, item.req, []),
                }
            )
            for cid, (_, item) in self.pending.items()
        ]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        f = await self.client.files.create(file=("batch.jsonl", data), purpose="batch")
        batch = await self.client.batches.create(
            input_file_id=f.id,
            endpoint=ENDPOINT,
            completion_window="24h",
            metadata={"forenset_group": group},
        )
        await asyncio.to_thread(
            self.ledger.append,
            {
                "event": "submitted",
                "group": group,
                "batch_id": batch.id,
                "stage": self.stage,
                "backend": self.spec.backend,
                "model": self.spec.model,
                "custom_ids": sorted(self.pending),
                "input_file_id": f.id,
            },
        )
        for _, item in self.pending.values():
            item.attempts += 1
        return batch.id

    async def poll(self, group: str, batch_id: str) -> str:
        """Wait for a terminal status (or the wait limit) and collect what it produced."""
        waited = 0.0
        while True:
            batch = await self.client.batches.retrieve(batch_id)
            if batch.status in _TERMINAL:
                break
            if waited >= self.spec.batch_wait_s:
                return "waiting"
            await asyncio.sleep(self.spec.batch_poll_s)
            waited += self.spec.batch_poll_s
        await asyncio.to_thread(
            self.ledger.append,
            {"event": "status", "group": group, "batch_id": batch_id, "status": batch.status},
        )
        if batch.output_file_id:
            content = await self.client.files.content(batch.output_file_id)
            await self.collect(content.content, batch_id)
        if batch.error_file_id:
            content = await self.client.files.content(batch.error_file_id)
            await self.collect(content.content, batch_id)
        if batch.status == "failed":
            errs = batch.errors.data if batch.errors and batch.errors.data else []
            why = "; ".join(str(e.message) for e in errs[:3]) or "no reason given"
            self.fail_pending(f"batch {batch_id} failed: {why}", retryable=False, batch_id=batch_id)
        await asyncio.to_thread(
            self.ledger.append, {"event": "collected", "group": group, "batch_id": batch_id}
        )
        return str(batch.status)

    async def collect(self, data: bytes, batch_id: str) -> None:
        repairs: list[Any] = []
        for line in data.decode("utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            entry = self.pending.pop(row.get("custom_id", ""), None)
            if entry is None:
                continue
            i, item = entry
            resp = row.get("response") or {}
            body = resp.get("body") or {}
            status = int(resp.get("status_code") or 0)
            try:
                if status != 200:
                    err = body.get("error") or row.get("error") or {}
                    raise error_from_status(
                        status or 500, str(err.get("message", "")), err.get("code"), {}
                    )
                raw = reply_from_completion(ChatCompletion.model_validate(body), {})
            except LLMCallError as exc:
                res = self.eng.result(
                    item,
                    status="error",
                    error=exc.reason,
                    retryable=exc.retryable,
                    batch_id=batch_id,
                )
                self.results[i] = self.eng.finish(res, self.state, self.settings, self.stage)
                continue
            self.eng.charge(item, self.state, raw, batch=True)
            self.state.calls += 1
            parsed, perr = parse_reply(raw.text, item.req.response_model)
            if perr is None:
                await self.eng.store(item, self.cache, raw, batch_id)
                res = self.eng.result(
                    item, status="ok", text=raw.text, parsed=parsed, batch_id=batch_id
                )
                self.results[i] = self.eng.finish(res, self.state, self.settings, self.stage)
            elif self.settings.repair_retries > 0:
                repairs.append((i, item, [("assistant", raw.text), ("user", repair_message(perr))]))
            else:
                res = self.eng.result(
                    item, status="error", text=raw.text, error=perr, batch_id=batch_id
                )
                self.results[i] = self.eng.finish(res, self.state, self.settings, self.stage)

        async def repair(i: int, item: _Item, extra: list[tuple[str, str]]) -> None:
            online = item.spec.model_copy(update={"batch": False})
            item.spec = online
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
    except LLMCallError as exc:
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
    try:
        known = await asyncio.to_thread(g.ledger.batches_for, group)
        status = ""
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
    except openai.APIError as exc:
        g.fail_pending(
            f"batch API error: {redact(str(exc))[:300]}", retryable=True, batch_id=batch_id
        )
        return
    if g.pending:
        g.fail_pending(
            f"batch {batch_id} not finished yet; run again to collect it",
            retryable=True,
            batch_id=batch_id,
        )
