"""Optional cluster-wide pacing: each attempt takes a slot of a Prefect global rate limit."""

from __future__ import annotations

import asyncio
import os

import pytest
from llm_kit import openai_spec, settings

from forenset.backends.llm import ChatRequest, run_chat


@pytest.mark.slow
def test_prefect_rate_limit_slots_are_taken(openai_server, stage, tmp_path, monkeypatch):
    if "PREFECT_API_URL" not in os.environ:
        monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    monkeypatch.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.testing.utilities import prefect_test_harness

    async def create() -> None:
        async with get_client() as client:
            await client.create_global_concurrency_limit(
                GlobalConcurrencyLimitCreate(name="llm-test", limit=20, slot_decay_per_second=0.01)
            )

    async def active() -> int:
        async with get_client() as client:
            gcl = await client.read_global_concurrency_limit_by_name("llm-test")
            return int(gcl.active_slots)

    with prefect_test_harness(server_startup_timeout=90):
        asyncio.run(create())
        spec = openai_spec(openai_server, prefect_rate_limit="llm-test")
        reqs = [ChatRequest(task="t", item_id=str(i), system="", user=f"x{i}") for i in range(6)]
        out = run_chat(reqs, settings(spec), build_seed=0, stage=stage, cache=None)
        assert all(r.status == "ok" for r in out)
        assert asyncio.run(active()) >= 5  # six slots taken, decaying at 0.01/s
