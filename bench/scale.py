"""Scale-out: metadata-only stage tables of 100k and 1M synthetic rows through the real Scheduler.

Bench-local stages (no images) named like the project's tables so that ``forenset status`` and
``forenset query`` work on the run unchanged: ``sources`` (seeded synthetic rows, planned as
N / shard_size shards), ``captions``, ``instructions`` and ``judgments`` (derived columns, a
verdict-like score). Each size runs in its own child process, so peak RSS is that size's own.

Reports per size: build time, peak RSS, a no-op resume (every shard skipped; process() calls
counted), the `forenset status` path (manifests + state, in process and as the CLI) and a
`forenset query` count(*) over the largest table.

    PYTHONPATH=$PWD python bench/scale.py [--sizes 100000 1000000] [--shard-size 10000]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from forenset.config import validate_config
from forenset.scheduler import Scheduler
from forenset.schemas.common import stage_schema
from forenset.seeds import rng_for
from forenset.store.run_store import RunStore
from forenset.tasks.base import ShardSpec, Stage, StageContext
from forenset.worker import run_shards

S, I64, F64 = pa.string(), pa.int64(), pa.float64()
WORDS = np.array(
    "a the red blue small large dog cat car tree house street window sky person bench lamp "
    "river road sign chair table cup plate flower field mountain boat bicycle shadow".split()
)
VERBS = np.array("remove recolour move duplicate warp relight replace blur".split())
CALLS: Counter[str] = Counter()  # process() calls per stage (a no-op resume must make none)
_CALLS_LOCK = threading.Lock()


def _trace(n: int, seed: int, version: str) -> dict[str, Any]:
    return {
        "status": pa.array(["ok"] * n, S),
        "error": pa.nulls(n, S),
        "retryable": pa.array([False] * n),
        "backend": pa.array(["synthetic"] * n, S),
        "model": pa.nulls(n, S),
        "prompt_id": pa.nulls(n, S),
        "prompt_hash": pa.nulls(n, S),
        "seed": pa.array([seed] * n, I64),
        "stage_version": pa.array([version] * n, S),
        "elapsed_ms": pa.array(np.zeros(n), F64),
    }


def _phrases(rng: np.random.Generator, n: int, k: int) -> list[str]:
    idx = rng.integers(0, len(WORDS), size=(n, k))
    return [" ".join(row) for row in WORDS[idx]]


SIZE: dict[str, int] = {}  # the synthetic sources' size, set by child() (one build per process)


class _Counted(Stage):
    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        with _CALLS_LOCK:
            CALLS[self.name] += 1
        return self.derive(batch, shard)

    def derive(self, batch: pa.Table, shard: ShardSpec | None) -> pa.Table:
        raise NotImplementedError

    def table(self, cols: dict[str, Any], n: int, shard: ShardSpec) -> pa.Table:
        seed = int(shard.params.get("seed", self.ctx.seed))
        return pa.table({**cols, **_trace(n, seed, self.version)}, schema=self.output_schema)


class SynthSources(_Counted):
    """N seeded synthetic 'photos' (metadata only), planned as N / shard_size shards."""

    name: ClassVar[str] = "sources"
    key: ClassVar[str] = "image_id"
    output_schema: ClassVar[pa.Schema] = stage_schema(
        pa.field("image_id", S), pa.field("width", I64), pa.field("height", I64),
        pa.field("licence", S), pa.field("manifest_caption", S),
    )  # fmt: skip

    def stage_config(self) -> dict[str, Any]:
        return dict(SIZE)

    def plan_sources(self) -> list[ShardSpec]:
        n, size = SIZE["rows"], SIZE["shard_size"]
        return [
            self.spec(f"shard-{i:05d}", {}, [], {"start": s, "count": min(size, n - s)})
            for i, s in enumerate(range(0, n, size))
        ]

    def derive(self, batch: pa.Table, shard: ShardSpec | None) -> pa.Table:
        assert shard is not None
        start, n = shard.params["start"], shard.params["count"]
        rng = rng_for(self.ctx.seed, self.name, shard.shard_id)
        cols = {
            "image_id": [f"img-{i:08d}" for i in range(start, start + n)],
            "width": rng.integers(256, 4096, n),
            "height": rng.integers(256, 4096, n),
            "licence": np.array(["CC-BY", "CC0", "PD"])[rng.integers(0, 3, n)],
            "manifest_caption": _phrases(rng, n, 6),
        }
        return self.table(cols, n, shard)


class SynthCaptions(_Counted):
    name: ClassVar[str] = "captions"
    inputs: ClassVar[tuple[str, ...]] = ("sources",)
    input_columns: ClassVar[tuple[str, ...]] = ("image_id", "manifest_caption")
    key: ClassVar[str] = "image_id"
    output_schema: ClassVar[pa.Schema] = stage_schema(
        pa.field("image_id", S), pa.field("caption", S), pa.field("n_words", I64)
    )

    def derive(self, batch: pa.Table, shard: ShardSpec | None) -> pa.Table:
        assert shard is not None
        n = batch.num_rows
        rng = rng_for(self.ctx.seed, self.name, shard.shard_id)
        extra = _phrases(rng, n, 12)
        caps = [
            f"{m}, {e}." for m, e in zip(batch["manifest_caption"].to_pylist(), extra, strict=True)
        ]
        cols = {
            "image_id": batch["image_id"],
            "caption": caps,
            "n_words": pc.add(pc.count_substring(pa.array(caps, S), " "), 1),
        }
        return self.table(cols, n, shard)


class SynthInstructions(_Counted):
    name: ClassVar[str] = "instructions"
    inputs: ClassVar[tuple[str, ...]] = ("captions",)
    input_columns: ClassVar[tuple[str, ...]] = ("image_id",)
    key: ClassVar[str] = "instruction_id"
    output_schema: ClassVar[pa.Schema] = stage_schema(
        pa.field("instruction_id", S), pa.field("image_id", S), pa.field("instruction", S),
        pa.field("difficulty", I64),
    )  # fmt: skip

    def derive(self, batch: pa.Table, shard: ShardSpec | None) -> pa.Table:
        assert shard is not None
        n = batch.num_rows
        rng = rng_for(self.ctx.seed, self.name, shard.shard_id)
        ids = batch["image_id"].to_pylist()
        targets = WORDS[rng.integers(0, len(WORDS), n)]
        verbs = VERBS[rng.integers(0, len(VERBS), n)]
        cols = {
            "instruction_id": [f"{i}-e0" for i in ids],
            "image_id": ids,
            "instruction": [f"{v} the {t}" for v, t in zip(verbs, targets, strict=True)],
            "difficulty": rng.integers(1, 6, n),
        }
        return self.table(cols, n, shard)


class SynthJudgments(_Counted):
    name: ClassVar[str] = "judgments"
    inputs: ClassVar[tuple[str, ...]] = ("instructions",)
    input_columns: ClassVar[tuple[str, ...]] = ("instruction_id", "difficulty")
    key: ClassVar[str] = "instruction_id"
    output_schema: ClassVar[pa.Schema] = stage_schema(
        pa.field("instruction_id", S), pa.field("match_score", F64), pa.field("verdict", S)
    )

    def derive(self, batch: pa.Table, shard: ShardSpec | None) -> pa.Table:
        assert shard is not None
        n = batch.num_rows
        rng = rng_for(self.ctx.seed, self.name, shard.shard_id)
        diff = batch["difficulty"].to_numpy()
        score = np.clip(rng.beta(5, 2, n) - 0.05 * diff, 0, 1)
        verdict = np.where(score >= 0.6, "KEEP", np.where(score >= 0.4, "BORDERLINE", "DISCARD"))
        cols = {"instruction_id": batch["instruction_id"], "match_score": score, "verdict": verdict}
        return self.table(cols, n, shard)

    def counts(self, table: pa.Table) -> dict[str, int]:
        c = super().counts(table)
        v = table["verdict"].to_numpy(zero_copy_only=False)
        c["kept"], c["discarded"] = int((v == "KEEP").sum()), int((v == "DISCARD").sum())
        return c


BENCH_STAGES: list[type[Stage]] = [SynthSources, SynthCaptions, SynthInstructions, SynthJudgments]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def build_once(ctx: StageContext, workers: int) -> tuple[float, dict[str, Any]]:
    """One scheduler run with a thread pool (as flows/local.py does)."""
    stages = {s.name: s(ctx) for s in BENCH_STAGES}
    with cf.ThreadPoolExecutor(workers) as ex:

        def submit(stage_name: str, specs: list[ShardSpec]):
            return ex.submit(run_shards, stages[stage_name], specs)

        t0 = time.perf_counter()
        stats = Scheduler(ctx, submit, stages=BENCH_STAGES).run()
        wall = time.perf_counter() - t0
    failures = [f for s in stats.values() for f in s.failures]
    if failures:
        raise SystemExit(f"bench build failed: {failures[:3]}")
    return wall, {n: (s.run, s.skipped, s.rows) for n, s in stats.items()}


def status_path(store: RunStore) -> dict[str, Any]:
    """What `forenset status` reads: state.json and every stage manifest (footer counts)."""
    state = store.read_json("state.json", default={})
    out = {}
    for s in BENCH_STAGES:
        shards = store.manifest(s.name)
        out[s.name] = (len(shards), sum(x.rows for x in shards))
    return {"state": state.get("status"), "stages": out}


def child(rows: int, shard_size: int, workers: int, run_dir: str) -> dict[str, Any]:
    cfg = validate_config({"seed": 11, "run_dir": run_dir})
    SIZE.update(rows=rows, shard_size=shard_size)
    ctx = StageContext(RunStore(run_dir), cfg)
    rss0 = peak_rss_mb()
    build_s, build_stats = build_once(ctx, workers)
    rss_build = peak_rss_mb()
    calls_build = dict(CALLS)
    CALLS.clear()
    resume_s, resume_stats = build_once(ctx, workers)
    t0 = time.perf_counter()
    st = status_path(RunStore(run_dir))
    status_s = time.perf_counter() - t0
    from forenset.store.views import connect

    t0 = time.perf_counter()
    con = connect(RunStore(run_dir), [s.name for s in BENCH_STAGES])
    count = con.execute("SELECT count(*) FROM judgments").fetchone()[0]
    query_s = time.perf_counter() - t0
    assert count == rows, (count, rows)
    return {
        "rows": rows,
        "shards_per_stage": -(-rows // shard_size),
        "build_s": build_s,
        "resume_s": resume_s,
        "process_calls_build": calls_build,
        "process_calls_resume": dict(CALLS),
        "resume_stats": resume_stats,
        "build_stats": build_stats,
        "rss_before_mb": rss0,
        "peak_rss_mb": rss_build,
        "status_inprocess_s": status_s,
        "query_inprocess_s": query_s,
        "status": st,
    }


def timed_cli(*args: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "forenset.cli", *args], capture_output=True, text=True, check=True
    )
    return time.perf_counter() - t0, p.stdout


LEAN_STATUS = """
import sys, time
t0 = time.perf_counter()
from forenset.store.run_store import RunStore
store = RunStore(sys.argv[1])
state = store.read_json("state.json", default={})
rows = {n: sum(s.rows for s in store.manifest(n)) for n in store.stages_present()}
print(state.get("status"), rows, f"{time.perf_counter() - t0:.3f}")
"""


def timed_python(code: str, *args: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    return time.perf_counter() - t0, p.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--shard-size", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--child", nargs=2, metavar=("ROWS", "RUN_DIR"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(int(a.child[0]), a.shard_size, a.workers, a.child[1])))
        return
    print(f"load average at start: {os.getloadavg()[0]:.1f} (cpus: {os.cpu_count()})")
    results = []
    for n in a.sizes:
        with tempfile.TemporaryDirectory(prefix="forenset-scale-") as d:
            run = os.path.join(d, "run")
            cmd = [sys.executable, __file__, "--shard-size", str(a.shard_size)]
            cmd += ["--workers", str(a.workers), "--child", str(n), run]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            r["cli_status_s"], status_out = timed_cli("status", run)
            r["cli_version_s"], _ = timed_cli("--help")  # interpreter + CLI import alone
            r["lean_status_s"], lean = timed_python(LEAN_STATUS, run)  # run store import only
            assert str(n) in lean, lean
            r["cli_query_s"], q = timed_cli(
                "query", run, "SELECT count(*) AS n FROM judgments", "-f", "json"
            )
            r["query_count"] = json.loads(q)[0]["n"]
            r["disk_mb"] = (
                sum(os.path.getsize(os.path.join(p, f)) for p, _, fs in os.walk(run) for f in fs)
                / 2**20
            )
            assert "judgments" in status_out and r["query_count"] == n
            results.append(r)
        print(
            f"{n:>9,} rows ({r['shards_per_stage']} shards/stage x 4 stages): "
            f"build {r['build_s']:.1f}s, peak RSS {r['peak_rss_mb']:.0f} MB "
            f"(after imports {r['rss_before_mb']:.0f} MB), disk {r['disk_mb']:.0f} MB"
        )
        ratio = r["resume_s"] / r["build_s"]
        print(
            f"    no-op resume {r['resume_s']:.2f}s = {100 * ratio:.1f}% of build (goal <= 5%), "
            f"process() calls: build {sum(r['process_calls_build'].values())}, "
            f"resume {sum(r['process_calls_resume'].values())}"
        )
        print(
            f"    status path in process {1000 * r['status_inprocess_s']:.0f} ms; "
            f"`forenset status` CLI {r['cli_status_s']:.2f}s "
            f"(of which interpreter+imports ~{r['cli_version_s']:.2f}s: `forenset --help`); "
            f"`forenset query` count(*) {r['cli_query_s']:.2f}s -> {r['query_count']:,}"
        )
        print(
            f"    same status read in a process importing only the run store: "
            f"{r['lean_status_s']:.2f}s; the query in process (views + count): "
            f"{1000 * r['query_inprocess_s']:.0f} ms"
        )
    if len(results) >= 2:
        a_, b_ = results[0], results[-1]
        print(
            f"RSS {b_['rows']:,} vs {a_['rows']:,} rows: {b_['peak_rss_mb']:.0f} / "
            f"{a_['peak_rss_mb']:.0f} MB = {b_['peak_rss_mb'] / a_['peak_rss_mb']:.2f}x "
            f"for {b_['rows'] / a_['rows']:.0f}x the rows"
        )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
