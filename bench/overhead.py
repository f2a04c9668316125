"""Prefect overhead: the demo build through the Prefect flow vs the same stages in a bare loop.

Same config (examples/demo.yaml, offline), a fresh run directory for every build, the same
number of workers (the config's default thread runner). Order: a trivial flow (cold: starts
the ephemeral API server), the same trivial flow again (warm), then bare / Prefect builds
alternated ``--repeat`` times; the ratio uses the best of each (the machine is shared).

    PYTHONPATH=$PWD python bench/overhead.py [--repeat 2] [--config examples/demo.yaml]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

_PREFECT_HOME = tempfile.mkdtemp(prefix="forenset-bench-prefect-")
os.environ.setdefault("PREFECT_HOME", _PREFECT_HOME)
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("OMP_NUM_THREADS", "1")


def trivial_flow_seconds() -> float:
    from prefect import flow

    @flow(name="forenset-bench-noop")
    def noop() -> int:
        return 1

    t0 = time.perf_counter()
    noop()
    return time.perf_counter() - t0


def bare(cfg, workers: int) -> tuple[float, int]:
    from forenset.flows.local import run_local
    from forenset.tasks.export import export_dataset

    with tempfile.TemporaryDirectory(prefix="forenset-bare-") as d:
        t0 = time.perf_counter()
        store, stats, executed = run_local(cfg, d, workers=workers)
        export_dataset(store, cfg)  # run_build exports too
        wall = time.perf_counter() - t0
    assert not any(s.failures for s in stats.values()), "bare build had failed shards"
    return wall, sum(executed.values())


def prefect(cfg) -> tuple[float, int]:
    from forenset.flows.build import run_build

    with tempfile.TemporaryDirectory(prefix="forenset-prefect-") as d:
        t0 = time.perf_counter()
        out = run_build(d, cfg)
        wall = time.perf_counter() - t0
    assert not any(s["failed"] for s in out["stages"].values()), "Prefect build had failures"
    return wall, sum(s["run"] for s in out["stages"].values())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=None, help="build config (default examples/demo.yaml)")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    from forenset.config import load_config

    cfg = load_config(a.config)
    rc = cfg.runner_for("sources")
    workers = rc.max_workers
    print(f"config: {a.config or 'examples/demo.yaml'}; runner {rc.kind} x {workers} workers")
    print(f"load average at start: {os.getloadavg()[0]:.1f} (cpus: {os.cpu_count()})")
    cold = trivial_flow_seconds()
    warm = trivial_flow_seconds()
    print(f"first flow in process (ephemeral API start + flow): {cold:.2f}s")
    print(f"second flow, same process (warm):                  {warm:.2f}s")
    bares, prefects, tasks = [], [], 0
    for i in range(a.repeat):
        b, n = bare(cfg, workers)
        p, tasks = prefect(cfg)
        assert n == tasks, f"bare loop ran {n} shards, Prefect {tasks}"
        bares.append(b)
        prefects.append(p)
        print(f"round {i + 1}: bare loop {b:.2f}s, Prefect flow (warm server) {p:.2f}s")
    b, p = min(bares), min(prefects)
    print(
        f"Prefect / bare = {p / b:.3f} (goal <= 1.15; best of {a.repeat}); "
        f"{tasks} shard tasks -> {1000 * (p - b) / tasks:.1f} ms per task "
        f"(NOTES.md: ~6-10 ms per thread-runner task)"
    )
    print(
        f"cold first build would add the server start: ({p + cold - warm:.2f}s) / {b:.2f}s = "
        f"{(p + cold - warm) / b:.3f}"
    )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
