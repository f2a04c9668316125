"""Throughput of run_chat against a rate-limited fake OpenAI server.

The fake (in its own process) answers after 250 ms and enforces 100 req/s with 429 +
Retry-After beyond it. We run N requests through run_chat twice: with the limit given in
config (rpm=6000) and with no limit configured (only 429s, Retry-After and AIMD to go by),
and time a small sequential sample to extrapolate a plain sequential loop.

    PYTHONPATH=$PWD python bench/llm_throughput.py [--n 2000]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import time

from pydantic import BaseModel


class Verdict(BaseModel):
    label: str
    score: int


def _serve(q: mp.Queue, latency: float, rps: float) -> None:
    from forenset.testing.fake_openai import FakeOpenAI

    server = FakeOpenAI(latency_s=latency, rate_limit_rps=rps).start()
    q.put(server.base_url)
    while True:
        time.sleep(3600)


def _requests(n: int, tag: str):
    from forenset.backends.llm import ChatRequest

    return [
        ChatRequest(
            task="judge",
            item_id=f"{tag}{i}",
            system="Judge the edit.",
            user=f"Instruction {i}: remove the red car. Diffs: car removed.",
            response_model=Verdict,
        )
        for i in range(n)
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--latency", type=float, default=0.25)
    ap.add_argument("--rps", type=float, default=100.0)
    ap.add_argument("--seq-sample", type=int, default=12)
    args = ap.parse_args()

    import os

    os.environ.setdefault("BENCH_KEY", "sk-bench")
    from openai import OpenAI

    from forenset.backends.llm import LLMSettings, ModelSpec, limiter_stats, run_chat

    q: mp.Queue = mp.get_context("spawn").Queue()
    proc = mp.get_context("spawn").Process(
        target=_serve, args=(q, args.latency, args.rps), daemon=True
    )
    proc.start()
    base_url = q.get(timeout=60)
    limit = args.rps

    # Sequential baseline: a plain loop with the SDK, one request at a time.
    client = OpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
    schema = {
        "type": "json_schema",
        "json_schema": {"name": "Verdict", "schema": Verdict.model_json_schema()},
    }
    t0 = time.perf_counter()
    for i in range(args.seq_sample):
        client.chat.completions.create(
            model="judge-seq",
            response_format=schema,
            messages=[{"role": "user", "content": f"item {i}"}],
        )
    seq_per = (time.perf_counter() - t0) / args.seq_sample
    seq_total = seq_per * args.n
    print(
        f"sequential: {args.seq_sample} requests timed, {seq_per * 1000:.0f} ms each -> "
        f"{seq_total:.0f} s extrapolated for {args.n} (not run)"
    )

    rows = []
    for name, rpm, model in (
        ("rpm configured", limit * 60, "judge-a"),
        ("no rpm configured", None, "judge-b"),
    ):
        spec = ModelSpec(
            backend="openai",
            model=model,
            base_url=base_url,
            api_key_env="BENCH_KEY",
            rpm=rpm,
            max_concurrency=64,
            timeout_s=30,
        )
        settings = LLMSettings(
            pool=[spec],
            max_retries=12,
            backoff_base_s=0.1,
            backoff_max_s=2.0,
            max_error_rate=0.2,
            error_window=200,
        )
        reqs = _requests(args.n, model)
        t0 = time.perf_counter()
        out = run_chat(reqs, settings, build_seed=0, stage=f"bench-{model}", cache=None)
        wall = time.perf_counter() - t0
        ok = sum(r.status == "ok" for r in out)
        stats = limiter_stats(spec)
        achieved = ok / wall
        rows.append((name, ok, wall, achieved, stats))
        print(
            f"{name}: {ok}/{args.n} ok in {wall:.1f} s -> {achieved:.1f} req/s = "
            f"{achieved / limit:.2f} x limit ({limit:g} req/s); speed-up over sequential "
            f"{seq_total / wall:.1f}x; 429s seen {stats['throttled']}, final concurrency "
            f"limit {stats['concurrency_limit']:.1f}"
        )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS (client process; the fake server runs in its own process): {peak_mb:.0f} MB")
    proc.terminate()


if __name__ == "__main__":
    main()
