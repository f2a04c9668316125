"""Pipelining: shards of stage B start as soon as their input shards of A are done.

Runs the demo DAG twice on the same data — pipelined (the default scheduler) and with a
whole-stage barrier — with an artificially slow stage (a fixed sleep per candidates shard,
standing in for GPU generation). Prints wall time, worker idle time and the saving.

    python bench/pipelining.py [--delay 0.6] [--workers 4]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import tempfile
import threading
import time

from forenset.config import load_config
from forenset.scheduler import Scheduler
from forenset.stages import stage_class
from forenset.store.run_store import RunStore
from forenset.tasks.base import StageContext
from forenset.worker import run_shards


def run(barrier: bool, delay: float, workers: int, slow: str) -> tuple[float, float]:
    cfg = load_config(None)
    with tempfile.TemporaryDirectory() as d:
        ctx = StageContext(RunStore(d), cfg)
        busy = [0.0]
        lock = threading.Lock()
        with cf.ThreadPoolExecutor(workers) as ex:

            def work(stage_name, specs):
                t0 = time.perf_counter()
                if stage_name == slow:
                    time.sleep(delay * len(specs))
                out = run_shards(stage_class(stage_name)(ctx), specs)
                with lock:
                    busy[0] += time.perf_counter() - t0
                return out

            t0 = time.perf_counter()
            Scheduler(ctx, lambda n, s: ex.submit(work, n, s), barrier=barrier).run()
            wall = time.perf_counter() - t0
    return wall, workers * wall - busy[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--delay", type=float, default=0.6, help="seconds added to each slow-stage shard"
    )
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--slow", default="candidates")
    a = ap.parse_args()
    run(False, 0.0, a.workers, a.slow)  # warm caches (imports, sample decoding)
    pw, pi = run(False, a.delay, a.workers, a.slow)
    bw, bi = run(True, a.delay, a.workers, a.slow)
    print(f"slow stage: {a.slow} (+{a.delay}s per shard), {a.workers} workers")
    print(f"barrier   : wall {bw:6.2f}s  worker idle {bi:6.2f}s")
    print(f"pipelined : wall {pw:6.2f}s  worker idle {pi:6.2f}s")
    print(
        f"idle time saved {bi - pi:.2f}s ({(bi - pi) / max(bi, 1e-9):.0%}), wall-clock ratio barrier/pipelined {bw / pw:.2f}"
    )


if __name__ == "__main__":
    main()
