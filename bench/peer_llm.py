"""forenset's model client beside Bespoke Curator on one strict OpenAI-compatible server,
under fault mixes.

The server (FakeOpenAI in its own process, fresh for every run) answers after 0.25 s and
admits 40 requests in any one-second window (``strict_window``), 429 + Retry-After beyond it,
with x-ratelimit-* headers. Both clients send the same N structured-output requests at
2280 req/min, 32 in flight, 5 retries, 3 s request timeout, one model each. Mixes
(``--mixes all`` runs every one; faults are drawn per admitted request from a seeded RNG):

- clean: no faults;
- mixed: the issue-42 table, 15 % evenly: 429 + Retry-After 1 s, 500, a 20 s stall, fenced
  JSON, truncated JSON, a refusal;
- 429: 6 % 429 + Retry-After 1 s on a server running below its limit;
- 5xx: bursts, the first 0.6 s of every 4 s answers 500/502/503 to everything, and 1 %
  sporadic 500s between;
- stalls: 3 % 20 s stalls, 3 % truncated JSON, 3 % fenced JSON;
- refusals: 4 % refusals, 4 % malformed structured output (valid JSON of the wrong shape,
  or prose with no JSON);
- overloaded: a server that really is overloaded: it admits 25 req/s, below what both
  clients are told (38 req/s), 429 + Retry-After beyond, no x-ratelimit-* headers.

Each mix runs both clients back to back, the order swapped every round. Curator 0.1.31 runs
in its own virtual environment, created here on first use (never a forenset dependency); it
needs the network once to install (``--peer-venv`` to reuse another one).

It ends with the medians per client and mix, forenset ÷ Curator in ok rows/s, and, for the
clean mix, the floors of any client's wall time (at the configured rate and at the server's
own limit).

    PYTHONPATH=$PWD python bench/peer_llm.py --mixes all [--n 600] [--rounds 2]
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
KINDS = ("429", "500", "stall", "fenced", "truncated", "refusal")  # the "mixed" mix


class Verdict(BaseModel):
    label: str
    score: int
    reasons: list[str]


def prompt(i: int) -> str:
    return f"Edit {i}: the red car on the left was removed. Judge whether the edit is visible."


# -- the server ---------------------------------------------------------------------------


MIXES = ("clean", "mixed", "429", "5xx", "stalls", "refusals", "overloaded")
OVERLOADED_RPS = 25.0  # the overloaded server's own limit, below the clients' 38 req/s


def _serve(conn: Any, rps: float, latency: float, mix: str, seed: int, stall_s: float) -> None:
    from forenset.testing.fake_openai import FakeOpenAI, Fault

    overloaded = mix == "overloaded"
    server = FakeOpenAI(
        latency_s=latency,
        rate_limit_rps=OVERLOADED_RPS if overloaded else rps,
        strict_window=True,
        ratelimit_headers=not overloaded,
    )
    rng = random.Random(seed)
    injected: dict[str, int] = {}
    admitted: list[float] = []  # arrival times of requests the window let through
    t_start = time.monotonic()

    def draw() -> str | None:
        """The fault of one admitted request under this mix (None: a good reply)."""
        u = rng.random()
        table: list[tuple[str, float]] = {
            "mixed": [(k, 0.025) for k in KINDS],
            "429": [("429", 0.06)],
            "5xx": [("500", 0.01)],
            "stalls": [("stall", 0.03), ("truncated", 0.03), ("fenced", 0.03)],
            "refusals": [("refusal", 0.04), ("malformed", 0.04)],
        }.get(mix, [])
        for kind, p in table:
            if u < p:
                return kind
            u -= p
        if mix == "5xx" and (time.monotonic() - t_start) % 4.0 < 0.6:
            return "burst"
        return None

    def fault_for(body: dict[str, Any]) -> Fault | None:
        with server.lock:
            admitted.append(time.monotonic())
            kind = draw()
            if kind is None:
                return None
            injected[kind] = injected.get(kind, 0) + 1
            pick = rng.random()
        if kind == "429":
            return Fault(status=429, retry_after_s=1.0, message="slow down")
        if kind == "500":
            return Fault(status=500)
        if kind == "burst":
            return Fault(status=(500, 502, 503)[int(pick * 3)], message="upstream overloaded")
        if kind == "stall":
            return Fault(delay_s=stall_s)
        if kind == "refusal":
            return Fault(refusal="I can't help with that.")
        if kind == "malformed":
            if pick < 0.5:
                return Fault(content='{"label": "edited", "score": "high"}')
            return Fault(content="The edit is visible: the car's shadow remains on the road.")
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
    base_url: str, n: int, rpm: float, conc: int, retries: int, models: int = 1
) -> dict:
    os.environ["PEER_BENCH_KEY"] = "sk-bench"
    # the client's modules imported before the clock starts, as Curator's SDKs are
    import httpx  # noqa: F401
    import openai  # noqa: F401

    import forenset.backends.llm.engine  # noqa: F401
    import forenset.backends.llm.openai_chat  # noqa: F401
    from forenset.backends.llm import ChatRequest, LLMSettings, ModelSpec, limiter_stats, run_chat

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
    lim = limiter_stats(pool[0])
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
        "hedges": lim["hedges"],
        "hedge_wins": lim["hedge_wins"],
        "overloads": lim["overloads"],
        "holds": lim["holds"],
        "final_concurrency": lim["concurrency_limit"],
        "p95": lim["latency_p95"],
        "paused_s": lim["paused_s"],
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


def one_run(client: str, mix: str, args: argparse.Namespace, py: Path | None, seed: int) -> dict:
    parent, child = mp.Pipe()
    proc = mp.Process(
        target=_serve,
        args=(child, args.rps, args.latency, mix, seed, args.stall_s),
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
    res.update(client=client, mix=mix)
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
    ap.add_argument("--mixes", default="clean,mixed", help=f"'all' or some of {','.join(MIXES)}")
    ap.add_argument("--clients", default="forenset,curator")
    ap.add_argument("--peer-venv", default="/tmp/forenset-peer-venv")
    ap.add_argument("--models", type=int, default=1, help="forenset's pool size (2: a fallback)")
    ap.add_argument("--stall-s", type=float, default=20.0)
    # the commands of earlier records (docs/benchmarks.md): --modes clean,faults (faults is
    # now the "mixed" mix); --hostile (one model, 20 s stalls) is now the default
    ap.add_argument("--modes", help=argparse.SUPPRESS)
    ap.add_argument("--hostile", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker", nargs=6, metavar="ARG", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.modes:
        args.mixes = args.modes.replace("faults", "mixed")
    if args.hostile:
        args.models, args.stall_s = 1, 20.0

    if args.worker:
        base_url, n, rpm, conc, retries, models = args.worker
        res = forenset_worker(base_url, int(n), float(rpm), int(conc), int(retries), int(models))
        print("FORENSET_RESULT " + json.dumps(res))
        return

    mixes = list(MIXES) if args.mixes == "all" else args.mixes.split(",")
    unknown = sorted(set(mixes) - set(MIXES))
    if unknown:
        ap.error(f"unknown mix(es) {unknown}; choose from {', '.join(MIXES)} or all")
    clients = args.clients.split(",")
    py = peer_python(Path(args.peer_venv)) if "curator" in clients else None
    runs: list[dict] = []
    print(
        f"{args.n} requests, server {args.rps:g} req/s strict window ({OVERLOADED_RPS:g} when"
        f" overloaded), {args.latency:g} s latency; clients {args.rpm:g} req/min,"
        f" {args.concurrency} in flight, {args.retries} retries; forenset pool"
        f" {args.models} model(s), stalls {args.stall_s:g} s"
    )
    hdr = f"{'mix':10} {'client':9} {'wall s':>7} {'ok':>8} {'ok/s':>6} {'sent':>5} {'429 over':>8} {'adm/s':>5}"
    print(hdr + "  notes")
    for rnd in range(args.rounds):
        for mix in mixes:
            order = clients if rnd % 2 == 0 else clients[::-1]
            for client in order:
                res = one_run(client, mix, args, py, seed=1000 * rnd + MIXES.index(mix))
                runs.append(res)
                notes = ""
                if client == "forenset":
                    notes = (
                        f"regens {res['regenerations']} hedges {res['hedges']}"
                        f"/{res['hedge_wins']} won, overload cuts {res['overloads']},"
                        f" holds {res['holds']}, end conc {res['final_concurrency']:.1f},"
                        f" p95 {res['p95'] or 0:.2f} s, paused {res['paused_s']:.1f} s"
                    ) + (f", errors {res['errors']}" if res["errors"] else "")
                if res["injected"]:
                    notes += f" injected {res['injected']}"
                print(
                    f"{mix:10} {client:9} {res['wall_s']:7.1f} {res['ok']:>4}/{args.n:<3} "
                    f"{res['ok'] / res['wall_s']:6.1f} {res['sent']:5} {res['over_rate_429']:8} {res['admitted_rps']:5.1f}  "
                    + notes,
                    flush=True,
                )
    print("\nmedians (ok rows/s; ÷ limit = ok rows/s ÷ server req/s)")
    verdicts: list[str] = []
    for mix in mixes:
        rate: dict[str, float] = {}
        for client in clients:
            rs = [r for r in runs if r["mix"] == mix and r["client"] == client]
            rate[client] = statistics.median(r["ok"] / r["wall_s"] for r in rs)
            wall = statistics.median(r["wall_s"] for r in rs)
            missing = max(args.n - r["rows"] for r in rs)
            not_ok = max(args.n - r["ok"] for r in rs)
            print(
                f"{mix:10} {client:9} wall {wall:5.1f} s  {rate[client]:5.1f} ok/s  "
                f"÷ limit {rate[client] / args.rps:.2f}  most rows missing {missing}, "
                f"not ok {not_ok}"
            )
        if "forenset" in rate and "curator" in rate:
            pairs = [
                (f["ok"] / f["wall_s"]) / (c["ok"] / c["wall_s"])
                for f, c in zip(
                    [r for r in runs if r["mix"] == mix and r["client"] == "forenset"],
                    [r for r in runs if r["mix"] == mix and r["client"] == "curator"],
                    strict=True,
                )
            ]
            print(
                f"{mix:10} forenset ÷ curator ok rows/s: {rate['forenset'] / rate['curator']:.2f}"
                f" (per round {', '.join(f'{x:.2f}' for x in pairs)})"
            )
            if mix == "clean":
                print_bounds(args, rate["curator"], rate["forenset"])
            verdicts.append(verdict(args, mix, runs, rate["forenset"] / rate["curator"]))
    if verdicts:
        print(f"\ngoals (issue 42), load average {os.getloadavg()[0]:.1f} now")
        print("\n".join(verdicts))


GOAL_RATIO = 1.2  # forenset's ok rows/s over Curator's on every fault mix
GOAL_FLOOR = 0.03  # the clean mix: forenset's wall within this of the configured-rate floor


def verdict(args: argparse.Namespace, mix: str, runs: list[dict], ratio: float) -> str:
    """One line per mix: every goal of issue 42 that applies to it, MET or MISSED."""
    fs = [r for r in runs if r["mix"] == mix and r["client"] == "forenset"]
    all_ok = all(r["ok"] == args.n for r in fs)
    parts = [f"ok rows {min(r['ok'] for r in fs)}/{args.n} {'MET' if all_ok else 'MISSED'}"]
    if mix == "clean":
        floor = (args.n - 1) / (args.rpm / 60.0) + args.latency
        over = statistics.median(r["wall_s"] for r in fs) / floor - 1
        met = over <= GOAL_FLOOR
        parts.append(
            f"wall {100 * over:+.1f} % over the {floor:.2f} s floor (goal <= "
            f"{100 * GOAL_FLOOR:g} %) {'MET' if met else 'MISSED'}"
        )
    else:
        met = ratio >= GOAL_RATIO
        parts.append(
            f"{ratio:.2f} x Curator's ok rows/s (goal >= {GOAL_RATIO:g}) {'MET' if met else 'MISSED'}"
        )
    return f"{mix:10} " + "; ".join(parts)


def print_bounds(args: argparse.Namespace, curator_rate: float, forenset_rate: float) -> None:
    """The fastest any client can finish the clean run, and forenset's wall over it.

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
            f"clean      bound at the {label}: wall >= {floor:.2f} s = "
            f"{args.n / floor / curator_rate:.2f} x curator's ok rows/s; forenset's median "
            f"wall is {100 * (args.n / forenset_rate / floor - 1):+.1f} % over it"
        )


if __name__ == "__main__":
    main()
