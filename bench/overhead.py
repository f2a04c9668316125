"""Prefect overhead: the demo build through the Prefect flow vs the same stages in a bare loop.

Same config (the default forenset/data/demo.yaml, offline), a fresh run directory for every build, the same
number of workers (the config's default thread runner). Order: a trivial flow (cold: starts
the ephemeral API server), the same trivial flow again (warm), one unmeasured bare and Prefect
build (imports and first-use caches), then bare / Prefect builds alternated ``--repeat``
times; the ratio uses the medians (the machine is shared). CPU seconds (this process and the
API server child, via psutil when installed) are printed as a load-independent figure. The
gap is then split by a timeline of the shard bundles (``Timeline``): the flow's start and end,
gaps between tasks on a worker (Prefect's per-task engine), slower work inside tasks (CPU
contention) and the rest (workers waiting on dependencies).

``--photos N`` runs the demo stages on N real photos (crops of the bundled samples) instead
of the 10 samples; ``--shard-size S`` overrides the demo's 4 rows per shard; ``--sweep`` times
synthetic shard-shaped tasks of 50 ms..4 s of work, Prefect vs a bare thread pool.

    PYTHONPATH=$PWD python bench/overhead.py [--repeat 3] [--photos 64 --shard-size 16]
        [--sweep [--sweep-runner processes] [--sweep-only]] [--untagged] [--unbundled] [--config forenset/data/demo.yaml]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

_PREFECT_HOME = tempfile.mkdtemp(prefix="forenset-bench-prefect-")
os.environ.setdefault("PREFECT_HOME", _PREFECT_HOME)
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("OMP_NUM_THREADS", "1")


def photo_folder(n: int, out: str) -> str:
    """``n`` distinct real photos for a bigger run of the demo stages: crops of the bundled
    samples at varied offsets and scales (mirrored every other round), written as PNG."""
    import cv2
    import numpy as np

    from forenset.tasks.sources import load_sample_bytes, sample_manifest

    base = []
    for rec in sample_manifest():
        arr = cv2.imdecode(np.frombuffer(load_sample_bytes(rec["loader"]), np.uint8), 1)
        if arr is not None and min(arr.shape[:2]) >= 256:
            base.append(arr)
    os.makedirs(out, exist_ok=True)
    for i in range(n):
        img = base[i % len(base)]
        k = i // len(base)
        h, w = img.shape[:2]
        frac = 0.9 - 0.1 * (k % 4)
        ch, cw = int(h * frac), int(w * frac)
        y0, x0 = (h - ch) * ((k * 37) % 11) // 10, (w - cw) * ((k * 53) % 11) // 10
        crop = img[y0 : y0 + ch, x0 : x0 + cw]
        if k % 2:
            crop = crop[:, ::-1]
        cv2.imwrite(os.path.join(out, f"photo-{i:04d}.png"), crop)
    return out


def trivial_flow_seconds() -> float:
    from prefect import flow

    @flow(name="forenset-bench-noop")
    def noop() -> int:
        return 1

    t0 = time.perf_counter()
    noop()
    return time.perf_counter() - t0


def noop_tasks_seconds(n: int, workers: int) -> float:
    """Wall time of ``n`` empty tasks on a ThreadPoolTaskRunner: Prefect's own per-task cost."""
    from prefect import flow, task
    from prefect.cache_policies import NO_CACHE
    from prefect.task_runners import ThreadPoolTaskRunner

    @task(cache_policy=NO_CACHE, persist_result=False)
    def empty(i: int) -> int:
        return i

    @flow(name="forenset-bench-tasks", task_runner=ThreadPoolTaskRunner(max_workers=workers))
    def many() -> int:
        return sum(f.result() for f in [empty.submit(i) for i in range(n)])

    t0 = time.perf_counter()
    many()
    return time.perf_counter() - t0


_BUF = bytes(1 << 20)


def _burn(loops: int) -> int:
    """Shard-like work: hashing releases the GIL, as OpenCV, NumPy and I/O do in real stages."""
    import hashlib

    for _ in range(loops):
        hashlib.sha256(_BUF).digest()
    return loops


def _calibrate() -> float:
    """sha256 loops per millisecond on this machine (one thread)."""
    t0 = time.perf_counter()
    _burn(200)
    return 200 / ((time.perf_counter() - t0) * 1000)


def _sweep_shard(stage_name: str, spec: dict, run_uri: str, config_hash: str) -> dict:
    """A shard task's signature and result shape, with fixed work instead of a stage."""
    return {"rows": _burn(spec["loops"])}


def sweep(workers: int, config_hash: str, runner: str = "threads") -> None:
    """Prefect's cost per task against the work in a shard: N shard-shaped tasks of W ms each,
    through a Prefect flow (thread or process runner, the same task options and parameters as
    the build) and through a bare pool of the same kind, side by side. Tells how large a task
    must be (``min_task_seconds``)."""
    import concurrent.futures as cf

    from prefect import flow, task
    from prefect.cache_policies import NO_CACHE
    from prefect.task_runners import ProcessPoolTaskRunner, ThreadPoolTaskRunner

    per_ms = _calibrate()
    shard_task = task(_sweep_shard, name="shard", cache_policy=NO_CACHE, persist_result=False)
    prefect_runner = ThreadPoolTaskRunner if runner == "threads" else ProcessPoolTaskRunner
    bare_executor = cf.ThreadPoolExecutor if runner == "threads" else cf.ProcessPoolExecutor

    @flow(name="forenset-bench-sweep", task_runner=prefect_runner(max_workers=workers))
    def through_prefect(specs: list[dict]) -> int:
        futs = [
            shard_task.with_options(task_run_name=f"s:{i}").submit(
                stage_name="s", spec=sp, run_uri="/tmp/x", config_hash=config_hash
            )
            for i, sp in enumerate(specs)
        ]
        return sum(f.result()["rows"] for f in futs)

    def bare_pool(specs: list[dict]) -> int:
        with bare_executor(workers) as ex:
            futs = [ex.submit(_sweep_shard, "s", sp, "/tmp/x", config_hash) for sp in specs]
            return sum(f.result()["rows"] for f in futs)

    total_ms = 16000  # the same work in every row, cut into shards of different sizes
    print(
        f"shard-size sweep: {total_ms / 1000:.0f} s of work on {workers} {runner} "
        f"(sha256 loops, {per_ms:.1f} per ms); the fixed per-flow cost is the warm trivial flow"
    )
    fixed = statistics.median(trivial_flow_seconds() for _ in range(3))
    print(f"  fixed cost of one flow run (trivial flow, warm, median of 3): {fixed:.2f}s")
    print("  work/shard  shards  bare     Prefect  ratio   per-task cost (net of the flow's)")
    for ms in (50, 200, 1000, 4000) if runner == "threads" else (200, 1000, 4000, 8000):
        n = total_ms // ms
        specs = [{"loops": max(1, round(ms * per_ms))} for _ in range(n)]
        bs, ps = [], []
        for _ in range(2):  # alternated, medians: this VM's speed drifts by 10-30 %
            t0 = time.perf_counter()
            bare_pool(specs)
            bs.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            through_prefect(specs)
            ps.append(time.perf_counter() - t0)
        b, p = statistics.median(bs), statistics.median(ps)
        per_task = max(0.0, p - b - fixed) / n * workers
        print(
            f"  {ms:7d} ms  {n:6d}  {b:6.2f}s  {p:6.2f}s  {p / b:5.3f}   {1000 * per_task:5.0f} ms "
            f"= {100 * per_task / (ms / 1000):.1f} % of the shard's work"
        )


class Timeline:
    """When each bundle of shards ran, on which thread: splits Prefect's extra wall time into a
    fixed start and end, gaps between tasks on a worker, and slower work inside tasks (CPU
    contention from the API server and Prefect's threads)."""

    def __init__(self) -> None:
        import threading

        import forenset.flows.build as build_mod
        import forenset.flows.local as local_mod

        self.calls: list[tuple[int, float, float]] = []
        original = build_mod.run_shards

        def recorded(stage, specs):
            t0 = time.perf_counter()
            try:
                return original(stage, specs)
            finally:
                self.calls.append((threading.get_ident(), t0, time.perf_counter()))

        build_mod.run_shards = local_mod.run_shards = recorded  # both call sites, one wrapper

    def start(self) -> None:
        self.calls.clear()
        self.t0 = time.perf_counter()

    def summary(self, t_end: float) -> dict[str, float]:
        """Seconds: ``start`` (call to first shard), ``end`` (last shard to return), ``busy``
        (inside shard bundles, summed over workers), ``gaps`` (between one bundle's end and the
        next one's start on the same worker), ``tasks``."""
        per_thread: dict[int, list[tuple[float, float]]] = {}
        for tid, a, b in self.calls:
            per_thread.setdefault(tid, []).append((a, b))
        gaps = 0.0
        for spans in per_thread.values():
            spans.sort()
            gaps += sum(b[0] - a[1] for a, b in zip(spans, spans[1:], strict=False))
        return {
            "start": min(a for _, a, _ in self.calls) - self.t0,
            "end": t_end - max(b for _, _, b in self.calls),
            "busy": sum(b - a for _, a, b in self.calls),
            "gaps": gaps,
            "tasks": len(self.calls),
        }


TIMELINE: list[Timeline] = []


def timeline() -> Timeline | None:
    return TIMELINE[0] if TIMELINE else None


class CPU:
    """CPU seconds of this process and of its children (the ephemeral API server)."""

    def __init__(self) -> None:
        try:
            import psutil

            self.me = psutil.Process()
        except ImportError:  # psutil is optional: wall times only
            self.me = None

    def now(self) -> tuple[float, float]:
        if self.me is None:
            return 0.0, 0.0
        t = self.me.cpu_times()
        kids = 0.0
        for c in self.me.children(recursive=True):
            try:
                ct = c.cpu_times()
                kids += ct.user + ct.system
            except Exception:  # noqa: BLE001 - a child that just exited
                pass
        return t.user + t.system, kids


def bare(cfg, workers: int) -> tuple[float, int]:
    from forenset.exports.dataset import export_dataset
    from forenset.flows.local import run_local

    with tempfile.TemporaryDirectory(prefix="forenset-bare-") as d:
        if timeline():
            timeline().start()
        t0 = time.perf_counter()
        store, stats, executed = run_local(cfg, d, workers=workers)
        export_dataset(store, cfg.export)  # run_build exports too
        wall = time.perf_counter() - t0
        LAST_PHASES[0] = timeline().summary(t0 + wall) if timeline() else None
    assert not any(s.failures for s in stats.values()), "bare build had failed shards"
    return wall, sum(executed.values())


def prefect(cfg, tags: bool = True) -> tuple[float, int]:
    """A warm ``run_build``. ``tags=False`` drops the per-stage task tags (diagnosis: every
    tagged task run acquires and releases a tag concurrency-slot lease through the API)."""
    from prefect.tasks import Task

    from forenset.flows.build import run_build

    original = Task.with_options

    def without_tags(self, *args, **kwargs):
        kwargs.pop("tags", None)
        return original(self, *args, **kwargs)

    if not tags:
        Task.with_options = without_tags
    try:
        with tempfile.TemporaryDirectory(prefix="forenset-prefect-") as d:
            if timeline():
                timeline().start()
            t0 = time.perf_counter()
            out = run_build(d, cfg)
            wall = time.perf_counter() - t0
            LAST_PHASES[0] = timeline().summary(t0 + wall) if timeline() else None
    finally:
        Task.with_options = original
    assert not any(s["failed"] for s in out["stages"].values()), "Prefect build had failures"
    LAST_TASKS[0] = out.get("tasks", 0)
    return wall, sum(s["run"] for s in out["stages"].values())


LAST_TASKS = [0]  # Prefect task runs of the last build (shards are bundled into tasks)
LAST_PHASES: list[dict[str, float] | None] = [None]  # Timeline.summary of the last build


def explain_gap(
    bares: list[float],
    prefects: list[float],
    phases_b: list[dict[str, float]],
    phases_p: list[dict[str, float]],
    workers: int,
) -> None:
    """Where Prefect's extra wall time goes (medians over rounds; per-worker seconds)."""

    def med(phases: list[dict[str, float]], key: str) -> float:
        return statistics.median(ph[key] for ph in phases)

    gap = statistics.median(prefects) - statistics.median(bares)
    start = med(phases_p, "start") - med(phases_b, "start")
    end = med(phases_p, "end") - med(phases_b, "end")
    between = (med(phases_p, "gaps") - med(phases_b, "gaps")) / workers
    slower = (med(phases_p, "busy") - med(phases_b, "busy")) / workers
    tasks = med(phases_p, "tasks")
    per_task = 1000 * med(phases_p, "gaps") / max(tasks - workers, 1)
    print(
        f"Prefect - bare = {gap:+.2f}s: flow start {start:+.2f}s, flow end {end:+.2f}s, "
        f"between tasks on a worker {between:+.2f}s ({per_task:.0f} ms x {tasks:.0f} tasks / "
        f"{workers} workers), slower work inside tasks {slower:+.2f}s (CPU contention), "
        f"rest {gap - start - end - between - slower:+.2f}s (workers waiting on dependencies)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=None, help="build config (default forenset/data/demo.yaml)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--sweep", action="store_true", help="also time synthetic shards of 50 ms..4 s of work"
    )
    ap.add_argument(
        "--sweep-runner",
        choices=["threads", "processes"],
        default="threads",
        help="runner kind of the --sweep (Prefect's and the bare pool's)",
    )
    ap.add_argument(
        "--sweep-only", action="store_true", help="run the --sweep and stop (no demo builds)"
    )
    ap.add_argument(
        "--photos",
        type=int,
        default=0,
        help="run the demo stages on N photos (crops of the bundled ones) instead of the 10",
    )
    ap.add_argument("--shard-size", type=int, default=None, help="override the config's shard_size")
    ap.add_argument(
        "--untagged", action="store_true", help="also run the flow without per-stage task tags"
    )
    ap.add_argument(
        "--unbundled",
        action="store_true",
        help="also run the flow with one shard per task (min_task_seconds: 0), side by side",
    )
    a = ap.parse_args()
    from forenset.config import load_config

    cfg = load_config(a.config)
    if a.shard_size:
        cfg = cfg.model_copy(update={"shard_size": a.shard_size})
    if a.photos:
        folder = photo_folder(a.photos, tempfile.mkdtemp(prefix="forenset-bench-photos-"))
        cfg = cfg.model_copy(
            update={
                "sources": cfg.sources.model_copy(update={"samples": "none", "folders": [folder]})
            }
        )
        print(f"sources: {a.photos} photos in {folder}")
    rc = cfg.runner_for("sources")
    workers = rc.max_workers
    print(
        f"config: {a.config or 'forenset/data/demo.yaml'}; shard_size {cfg.shard_size}; runner {rc.kind} x {workers} workers"
    )
    print(f"load average at start: {os.getloadavg()[0]:.1f} (cpus: {os.cpu_count()})")
    cold = trivial_flow_seconds()
    warm = trivial_flow_seconds()
    print(f"first flow in process (ephemeral API start + flow): {cold:.2f}s")
    print(f"second flow, same process (warm):                  {warm:.2f}s")
    n_noop = 100
    noop_s = noop_tasks_seconds(n_noop, workers)
    print(
        f"{n_noop} empty tasks, {workers} threads: {noop_s:.2f}s -> "
        f"{1000 * noop_s / n_noop * workers:.0f} ms per task per worker"
    )
    if a.sweep or a.sweep_only:
        sweep(workers, cfg.config_hash(), a.sweep_runner)
        if a.sweep_only:
            return
    # Warm-up, not measured: the first build in a process pays imports, first-use caches and
    # the sample decoding; counting it would flatter whichever side runs first.
    TIMELINE.append(Timeline())
    wb, _ = bare(cfg, workers)
    wp, _ = prefect(cfg)
    print(f"warm-up (not counted): bare loop {wb:.2f}s, Prefect flow {wp:.2f}s")
    cpu = CPU()
    bares, prefects, tasks = [], [], 0
    cpu_b, cpu_p, untagged, unbundled = [], [], [], []
    phases_b, phases_p = [], []
    one_per_task = cfg.model_copy(
        update={
            "runners": {
                k: v.model_copy(update={"min_task_seconds": 0}) for k, v in cfg.runners.items()
            }
        }
    )
    for i in range(a.repeat):
        c0 = cpu.now()
        b, n = bare(cfg, workers)
        phases_b.append(LAST_PHASES[0])
        c1 = cpu.now()
        p, tasks = prefect(cfg)
        c2 = cpu.now()
        phases_p.append(LAST_PHASES[0])
        bundled_tasks = LAST_TASKS[0]
        assert n == tasks, f"bare loop ran {n} shards, Prefect {tasks}"
        if a.unbundled:
            u1, _ = prefect(one_per_task)
            unbundled.append(u1)
            print(
                f"round {i + 1}: Prefect flow, one shard per task {u1:.2f}s "
                f"({LAST_TASKS[0]} tasks, ratio {u1 / b:.3f})"
            )
        if a.untagged:
            u, _ = prefect(cfg, tags=False)
            untagged.append(u)
            print(f"round {i + 1}: Prefect flow without task tags {u:.2f}s (ratio {u / b:.3f})")
        bares.append(b)
        prefects.append(p)
        cb = (c1[0] - c0[0], c1[1] - c0[1])
        cp = (c2[0] - c1[0], c2[1] - c1[1])
        cpu_b.append(sum(cb))
        cpu_p.append(sum(cp))
        print(
            f"round {i + 1}: bare loop {b:.2f}s (cpu {cb[0]:.1f}s), Prefect flow (warm server) "
            f"{p:.2f}s (cpu {cp[0]:.1f}s + API server {cp[1]:.1f}s, {bundled_tasks} tasks), "
            f"load {os.getloadavg()[0]:.1f}"
        )
    if not bares:
        return
    b, p = statistics.median(bares), statistics.median(prefects)
    print(
        f"wall: Prefect / bare = {p / b:.3f} (goal <= 1.15; medians of {a.repeat}); "
        f"{tasks} shards -> {1000 * (p - b) / tasks * workers:.0f} ms per shard per worker"
    )
    explain_gap(bares, prefects, phases_b, phases_p, workers)
    if unbundled:
        u = statistics.median(unbundled)
        print(f"wall with one shard per task: Prefect / bare = {u / b:.3f} (medians of {a.repeat})")
    if untagged:
        u = statistics.median(untagged)
        print(f"wall without task tags: Prefect / bare = {u / b:.3f} (medians of {a.repeat})")
    if cpu.me is not None:
        cb, cp = statistics.median(cpu_b), statistics.median(cpu_p)
        print(
            f"cpu (this process + API server): Prefect / bare = {cp / cb:.3f}; "
            f"{1000 * (cp - cb) / tasks:.0f} ms CPU per shard"
        )
    print(
        f"cold first build would add the server start: ({p + cold - warm:.2f}s) / {b:.2f}s = "
        f"{(p + cold - warm) / b:.3f}"
    )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
