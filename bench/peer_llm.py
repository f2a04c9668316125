"""forenset's model client beside Bespoke Curator on one strict OpenAI-compatible server.

The server (FakeOpenAI in its own process, fresh for every run) answers after 0.25 s and
admits 40 requests in any one-second window (``strict_window``), 429 + Retry-After beyond it,
with x-ratelimit-* headers. Both clients send the same N structured-output requests at
2280 req/min, 32 in flight, 5 retries, 3 s request timeout; clean, then with 15 % injected
faults (429 with Retry-After 1 s, 500, 4 s stalls, fenced JSON, truncated JSON, refusals:
2.5 % each, drawn per request). Runs alternate which client goes first.

forenset runs ``run_chat`` with a pool of two model names sharing the server's limit
(``rate_group``), so a refused item can go to the other model. Curator 0.1.31 runs in its own
virtual environment, created here on first use (never a forenset dependency); it needs
the network once to install (``--peer-venv`` to reuse another one).

``--hostile`` is the single-model mode: a pool of one model (no other model to fall back
to after a refusal) and 20 s stalls; forenset then relies on regenerating on the same model
(``LLMSettings.regenerations``), as Curator does.

It ends with the medians per client and mode and, for the clean runs, the two floors of any
client's wall time (at the configured rate and at the server's own limit) as multiples of
Curator's ok rows/s: how much faster than Curator a client could be on this machine at all.

    PYTHONPATH=$PWD python bench/peer_llm.py [--n 600] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

PEER = "bespokelabs-curator==0.1.31"
KINDS = ("429", "500", "stall", "fenced", "truncated", "refusal")


class Verdict(BaseModel):
    label: str
    score: int
    reasons: list[str]


def prompt(i: int) -> str:
    return f"Edit {i}: the red car on the left was removed. Judge whether the edit is visible."


# -- the server ---------------------------------------------------------------------------


def _serve(
    conn: Any, rps: float, latency: float, fault_rate: float, seed: int, stall_s: float = 4.0
) -> None:
    from forenset.testing.fake_openai import FakeOpenAI, Fault

    server = FakeOpenAI(
        latency_s=latency, rate_limit_rps=rps, strict_window=True, ratelimit_headers=True
    )
    rng = random.Random(seed)
    injected = dict.fromkeys(KINDS, 0)
    admitted: list[float] = []  # arrival times of requests the window let through

    def fault_for(body: dict[str, Any]) -> Fault | None:
        with server.lock:
            admitted.append(time.monotonic())
            if rng.random() >= fault_rate:
                return None
            kind = KINDS[rng.randrange(len(KINDS))]
            injected[kind] += 1
        if kind == "429":
            return Fault(status=429, retry_after_s=1.0, message="slow down")
        if kind == "500":
            return Fault(status=500)
        if kind == "stall":
            return Fault(delay_s=stall_s)
        if kind == "refusal":
            return Fault(refusal="I can't help with that.")
        text = json.dumps(server.default_reply(body))
        if kind == "fenced":
            return Fault(content=f"```json\n{text}\n```")
        return Fault(content=text[: len(text) // 2])

    server.fault_for = fault_for
    server.start()
    conn.send(server.base_url)
    while True:
        msg = conn.recv()
        if msg == "stats":
            with server.lock:
                conn.send(
                    {
                        "sent": server.counts.get("/v1/chat/completions", 0),
                        "over_rate_429": server.rate_limited,
                        "injected": dict(injected),
                        "admitted_rps": (len(admitted) - 1) / (admitted[-1] - admitted[0])
                        if len(admitted) > 1
                        else 0.0,
                    }
                )
        else:
            server.stop()
            conn.send("stopped")
            return


# -- the clients (each in its own process) -------------------------------------------------


def forenset_worker(
    base_url: str, n: int, rpm: float, conc: int, retries: int, models: int = 2
) -> dict:
    os.environ["PEER_BENCH_KEY"] = "sk-bench"
    import openai  # noqa: F401  # imported before the clock starts, as Curator's SDKs are

    from forenset.backends.llm import ChatRequest, LLMSettings, ModelSpec, run_chat

    pool = [
        ModelSpec(
            backend="openai",
            model=name,
            base_url=base_url,
            api_key_env="PEER_BENCH_KEY",
            rpm=rpm,
            max_concurrency=conc,
            timeout_s=3.0,
            rate_group="bench-server",
        )
        for name in ("gpt-4o-mini", "gpt-4o-mini-b")[:models]
    ]
    settings = LLMSettings(pool=pool, max_retries=retries, max_error_rate=1.0, error_window=n)
    reqs = [
        ChatRequest(
            task="judge", item_id=f"r{i}", system="", user=prompt(i), response_model=Verdict
        )
        for i in range(n)
    ]
    t0 = time.perf_counter()
    out = run_chat(reqs, settings, build_seed=0, stage="peer_bench", cache=None)
    wall = time.perf_counter() - t0
    errors: dict[str, int] = {}
    for r in out:
        if not r.ok:
            key = (r.error or "")[:40]
            errors[key] = errors.get(key, 0) + 1
    return {
        "wall_s": wall,
        "ok": sum(r.ok for r in out),
        "rows": len(out),
        "fallbacks": sum(r.refused_by is not None for r in out),
        "regenerations": sum(r.regenerations for r in out),
        "errors": errors,
    }


CURATOR_WORKER = r"""
import json, sys, time
from pydantic import BaseModel
from bespokelabs import curator

class Verdict(BaseModel):
    label: str
    score: int
    reasons: list[str]

class Judge(curator.LLM):
    response_format = Verdict
    def prompt(self, row):
        return row["prompt"]
    def parse(self, row, response):
        return {"i": row["i"], **response.model_dump()}

base_url, n, rpm, conc, retries = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows = [{"i": i, "prompt": f"Edit {i}: the red car on the left was removed. Judge whether the edit is visible."} for i in range(n)]
llm = Judge(model_name="gpt-4o-mini", backend="openai", backend_params={
    "base_url": base_url, "api_key": "sk-bench", "max_requests_per_minute": rpm,
    "max_tokens_per_minute": 1e9, "max_concurrent_requests": conc, "max_retries": retries,
    "request_timeout": 3, "require_all_responses": False})
t0 = time.perf_counter()
res = llm(rows)
wall = time.perf_counter() - t0
ds = res.dataset if hasattr(res, "dataset") else res
ok = len({int(r["i"]) for r in ds})
print("PEER_RESULT " + json.dumps({"wall_s": wall, "ok": ok, "rows": len(ds)}))
"""


def peer_python(venv: Path) -> Path:
    """The peer's interpreter, installing Curator into its own venv on first use."""
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    probe = subprocess.run([str(py), "-c", "import bespokelabs.curator"], capture_output=True)
    if probe.returncode != 0:
        subprocess.run([str(py), "-m", "pip", "install", "-q", PEER], check=True)
    return py


def curator_env(py: Path, work: Path) -> dict[str, str]:
    """Offline settings for Curator (see /work/shared/NOTES.md): no cache, viewer, telemetry,
    rich display or hub; litellm's bundled tokenizer and cost map."""
    tok = subprocess.run(
        [
            str(py),
            "-c",
            "import litellm, os; print(os.path.join(os.path.dirname(litellm.__file__),"
            " 'litellm_core_utils', 'tokenizers'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(
        CURATOR_DISABLE_CACHE="1",
        CURATOR_CACHE_DIR=str(work / "cache"),
        CURATOR_VIEWER="0",
        TELEMETRY_ENABLED="false",
        CURATOR_DISABLE_RICH_DISPLAY="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TIKTOKEN_CACHE_DIR=tok,
    )
    return env


def client_run(client: str, args: argparse.Namespace, base_url: str, py: Path | None) -> dict:
    common = [base_url, str(args.n), str(args.rpm), str(args.concurrency), str(args.retries)]
    if client == "forenset":
        cmd = [sys.executable, __file__, "--worker", *common, str(args.models)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
        marker = "FORENSET_RESULT "
    else:
        assert py is not None
        with tempfile.TemporaryDirectory(prefix="peer-curator-") as work:
            script = Path(work) / "worker.py"
            script.write_text(CURATOR_WORKER)
            proc = subprocess.run(
                [str(py), str(script), *common],
                capture_output=True,
                text=True,
                cwd=work,
                env=curator_env(py, Path(work)),
            )
        marker = "PEER_RESULT "
    for line in proc.stdout.splitlines():
        if line.startswith(marker):
            return json.loads(line[len(marker) :])
    raise RuntimeError(f"{client} run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def one_run(client: str, mode: str, args: argparse.Namespace, py: Path | None, seed: int) -> dict:
    parent, child = mp.Pipe()
    rate = args.fault_rate if mode == "faults" else 0.0
    proc = mp.Process(
        target=_serve,
        args=(child, args.rps, args.latency, rate, seed, args.stall_s),
        daemon=True,
    )
    proc.start()
    base_url = parent.recv()
    try:
        res = client_run(client, args, base_url, py)
        parent.send("stats")
        res.update(parent.recv())
    finally:
        parent.send("stop")
        parent.recv()
        proc.join(5)
    res.update(client=client, mode=mode)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rps", type=float, default=40.0)
    ap.add_argument("--latency", type=float, default=0.25)
    ap.add_argument("--rpm", type=float, default=2280.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--retries", type=int, default=5)
    ap.add_argument("--fault-rate", type=float, default=0.15)
    ap.add_argument("--modes", default="clean,faults")
    ap.add_argument("--clients", default="forenset,curator")
    ap.add_argument("--peer-venv", default="/tmp/forenset-peer-venv")
    ap.add_argument("--models", type=int, default=2, help="forenset's pool size (1: no fallback)")
    ap.add_argument("--stall-s", type=float, default=4.0)
    ap.add_argument(
        "--hostile", action="store_true", help="single-model mode: --models 1 --stall-s 20"
    )
    ap.add_argument("--worker", nargs=6, metavar="ARG", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.hostile:
        args.models, args.stall_s = 1, 20.0

    if args.worker:
        base_url, n, rpm, conc, retries, models = args.worker
        res = forenset_worker(base_url, int(n), float(rpm), int(conc), int(retries), int(models))
        print("FORENSET_RESULT " + json.dumps(res))
        return

    clients = args.clients.split(",")
    py = peer_python(Path(args.peer_venv)) if "curator" in clients else None
    runs: list[dict] = []
    print(
        f"{args.n} requests, server {args.rps:g} req/s strict window, {args.latency:g} s latency;"
        f" clients {args.rpm:g} req/min, {args.concurrency} in flight, {args.retries} retries;"
        f" forenset pool {args.models} model(s), stalls {args.stall_s:g} s"
    )
    hdr = f"{'mode':7} {'client':9} {'wall s':>7} {'ok':>8} {'ok/s':>6} {'sent':>5} {'429 over':>8} {'adm/s':>5}"
    print(hdr + "  notes")
    for rnd in range(args.rounds):
        for mode in args.modes.split(","):
            order = clients if rnd % 2 == 0 else clients[::-1]
            for client in order:
                res = one_run(client, mode, args, py, seed=1000 * rnd + len(runs))
                runs.append(res)
                notes = ""
                if client == "forenset":
                    notes = f"fallbacks {res['fallbacks']} regens {res['regenerations']}" + (
                        f", errors {res['errors']}" if res["errors"] else ""
                    )
                if mode == "faults":
                    notes += f" injected {sum(res['injected'].values())}"
                print(
                    f"{mode:7} {client:9} {res['wall_s']:7.1f} {res['ok']:>4}/{args.n:<3} "
                    f"{res['ok'] / res['wall_s']:6.1f} {res['sent']:5} {res['over_rate_429']:8} {res['admitted_rps']:5.1f}  "
                    + notes,
                    flush=True,
                )
    print("\nmedians (ok rows/s; ÷ limit = ok rows/s ÷ server req/s)")
    for mode in args.modes.split(","):
        rate: dict[str, float] = {}
        for client in clients:
            rs = [r for r in runs if r["mode"] == mode and r["client"] == client]
            rate[client] = statistics.median(r["ok"] / r["wall_s"] for r in rs)
            wall = statistics.median(r["wall_s"] for r in rs)
            missing = max(args.n - r["rows"] for r in rs)
            not_ok = max(args.n - r["ok"] for r in rs)
            print(
                f"{mode:7} {client:9} wall {wall:5.1f} s  {rate[client]:5.1f} ok/s  "
                f"÷ limit {rate[client] / args.rps:.2f}  most rows missing {missing}, "
                f"not ok {not_ok}"
            )
        if "forenset" in rate and "curator" in rate:
            print(
                f"{mode:7} forenset ÷ curator ok rows/s: {rate['forenset'] / rate['curator']:.2f}"
            )
            if mode == "clean":
                print_bounds(args, rate["curator"])


def print_bounds(args: argparse.Namespace, curator_rate: float) -> None:
    """The fastest any client can finish the clean run, as a multiple of Curator's rate.

    Requests start at most ``rate`` apart and the last reply comes ``latency`` after the last
    start, so the wall time is at least ``(n - 1) / rate + latency``: at the configured rate
    (which both clients must respect) and at the server's own limit (the hard floor).
    """
    for label, per_s in (
        (f"configured {args.rpm:g} req/min", args.rpm / 60.0),
        (f"server {args.rps:g} req/s", args.rps),
    ):
        floor = (args.n - 1) / per_s + args.latency
        print(
            f"clean   bound at the {label}: wall >= {floor:.2f} s = "
            f"{args.n / floor / curator_rate:.2f} x curator's ok rows/s"
        )


if __name__ == "__main__":
    main()
