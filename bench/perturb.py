"""Benchmark: perturbation throughput (images/s at 512^2) per split schedule, 1 vs 2 workers.

Run: PYTHONPATH=. python bench/perturb.py [--n 24] [--size 512]
Prints figures measured side by side in one run; worker processes use one thread each.
Also checks that 1- and 2-worker outputs are bit-identical and times the adversarial ops.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from concurrent.futures import ProcessPoolExecutor

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")


def _init_worker() -> None:
    """One thread per worker; warm caches (albumentations import, default UAP) off the clock."""
    import cv2
    import torch

    cv2.setNumThreads(1)
    torch.set_num_threads(1)
    if os.environ.get("FORENSET_BENCH_SYSTEM_ALLOCATOR") != "1":
        from forenset.runtime import tune_allocator

        tune_allocator()  # as execute_shard does in every stage worker
    from forenset.perturbations import REGISTRY
    from forenset.perturbations.photos import photo
    from forenset.seeds import rng_for

    img = photo("astronaut", 64)
    for name in ("uap", "iso_noise"):
        op = REGISTRY[name]
        op.apply(img, op.sample_params("train", rng_for(name), (0, 0)), rng_for(name))


def _barrier(sec: float) -> int:
    time.sleep(sec)
    return os.getpid()


def _job(args: tuple[str, int, int, int]) -> tuple[str, float]:
    from forenset.perturbations import PerturbationConfig, perturb_image
    from forenset.perturbations.photos import PHOTO_NAMES, photo

    split, seed, k, size = args
    c0 = time.process_time()
    img = photo(PHOTO_NAMES[k % len(PHOTO_NAMES)], size)
    out, _ = perturb_image(img, split=split, seed=seed, config=PerturbationConfig())
    return hashlib.sha256(out.tobytes()).hexdigest(), time.process_time() - c0


def _stream(n: int) -> float:
    """Memory-bound reference: float32 passes over a 512² RGB buffer (what image ops do)."""
    import numpy as np

    a = np.random.default_rng(0).random((512, 512, 3), dtype=np.float32)
    for _ in range(n):
        a = np.sqrt(a * a + 1.0) - 0.5
    return float(a[0, 0, 0])


def ceiling(rounds: int = 8) -> float:
    """This machine's own 2-vs-1-process speed-up on memory-bound numpy work."""
    walls = []
    for w in (1, 2):
        with ProcessPoolExecutor(max_workers=w, initializer=_init_worker) as ex:
            list(ex.map(_barrier, [1.0] * w))
            t = time.perf_counter()
            list(ex.map(_stream, [120] * rounds))
            walls.append(time.perf_counter() - t)
    return walls[0] / walls[1]


def run(workers: int, jobs: list[tuple[str, int, int, int]]) -> tuple[float, list[str], float]:
    with ProcessPoolExecutor(max_workers=workers, initializer=_init_worker) as ex:
        list(ex.map(_barrier, [1.0] * workers))  # start + warm every worker before timing
        t = time.perf_counter()
        res = list(ex.map(_job, jobs, chunksize=1))
        wall = time.perf_counter() - t
        return wall, [d for d, _ in res], sum(c for _, c in res)


def adversarial_timing(size: int) -> dict[str, float]:
    import torch

    from forenset.perturbations import REGISTRY, PerturbationConfig
    from forenset.perturbations.mixture import _overrides
    from forenset.perturbations.photos import photo
    from forenset.seeds import rng_for

    torch.set_num_threads(1)
    img = photo("coffee", size)
    out = {}
    for name in ("uap", "foa"):
        op = REGISTRY[name]
        rng = rng_for("bench", name)
        p = op.sample_params(
            "test", rng, (0.6, 1.0), _overrides(op, "test", rng, PerturbationConfig())
        )
        op.apply(img, p, rng_for(1))  # warm-up (trains the default UAP once)
        t = time.perf_counter()
        for _ in range(3):
            op.apply(img, p, rng_for(1))
        out[name] = (time.perf_counter() - t) / 3
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=192, help="images per split")
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=2, help="alternating 1/2-worker runs; best kept")
    args = ap.parse_args()
    from forenset.perturbations import SPLITS
    from forenset.seeds import derive_seed

    print(
        f"cpu cores visible: {os.cpu_count()}, image {args.size}x{args.size}, {args.n} images/split"
    )
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(
        f"{'split':<11}{'1 worker img/s':>16}{'2 workers img/s':>17}{'speedup':>9}"
        f"{'cpu ms/img':>12}{'cores used (2w)':>17}  identical"
    )
    for split in SPLITS:
        jobs = [(split, derive_seed(0, split, k), k, args.size) for k in range(args.n)]
        best1 = best2 = None
        same = True
        for _ in range(args.repeats):
            r1, r2 = run(1, jobs), run(2, jobs)
            same = same and r1[1] == r2[1]
            best1 = r1 if best1 is None or r1[0] < best1[0] else best1
            best2 = r2 if best2 is None or r2[0] < best2[0] else best2
        (t1, _, c1), (t2, _, c2) = best1, best2
        print(
            f"{split:<11}{args.n / t1:>16.2f}{args.n / t2:>17.2f}{t1 / t2:>8.2f}x"
            f"{1000 * c1 / args.n:>12.1f}{c2 / t2:>17.2f}  {same}"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f} (other processes share these cores)")
    print(f"machine ceiling: memory-bound numpy, 2 vs 1 processes: {ceiling():.2f}x")
    for size in (128, 256):
        times = adversarial_timing(size)
        print(
            f"adversarial @ {size}px, 1 thread: "
            + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in times.items())
        )


if __name__ == "__main__":
    main()
