"""Overhead of the perturbations *stage* over the bare catalogue ops (goal <= 20 %).

Same images, same seeds, one process, one thread: (a) `perturb_image` alone on decoded
arrays; (b) the stage's `process()` on a shard of rows — blob read + PNG decode, the same
ops, PSNR/SSIM quality rows, PNG encode + content-addressed blob write, Arrow table. Prints
both and the ratio, and the quality-metric share of the difference.

    PYTHONPATH=$PWD python bench/perturb_stage.py [--n 16] [--size 512]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import cv2
import numpy as np
import pyarrow as pa
import skimage.data

from forenset.config import validate_config
from forenset.images import decode_rgb, encode_png
from forenset.perturbations import perturb_image, quality
from forenset.seeds import derive_seed
from forenset.store.run_store import RunStore
from forenset.tasks.base import ShardSpec, StageContext
from forenset.tasks.perturb import Perturbations


def photos(n: int, size: int) -> list[np.ndarray]:
    base = [
        skimage.data.astronaut(),
        skimage.data.coffee(),
        skimage.data.chelsea(),
        skimage.data.rocket(),
    ]
    return [
        cv2.resize(base[i % len(base)], (size, size), interpolation=cv2.INTER_AREA)
        for i in range(n)
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--split", default="validation")
    a = ap.parse_args()
    cv2.setNumThreads(1)
    imgs = photos(a.n, a.size)
    with tempfile.TemporaryDirectory() as d:
        cfg = validate_config({"run_dir": d, "seed": 5})
        ctx = StageContext(RunStore(d), cfg)
        stage = Perturbations(ctx)
        pcfg = stage.catalogue_config()
        rows = [
            {
                "sample_id": f"s{i}",
                "label": "real",
                "split": a.split,
                "blob": ctx.store.put_blob(encode_png(im)),
            }
            for i, im in enumerate(imgs)
        ]
        batch = pa.Table.from_pylist(rows)
        spec = ShardSpec("perturbations", "bench", {"split": a.split}, [], {"split": a.split})
        stage.process(batch.slice(0, 2), spec)  # warm caches (UAP training, encoders, imports)
        seeds = [derive_seed(cfg.seed, "perturbations", a.split, r["sample_id"], 0) for r in rows]
        t0 = time.perf_counter()
        outs = [
            perturb_image(im, split=a.split, seed=s, config=pcfg)[0]
            for im, s in zip(imgs, seeds, strict=True)
        ]
        bare = time.perf_counter() - t0
        t0 = time.perf_counter()
        for im, out in zip(imgs, outs, strict=True):
            quality(im, out)
        q = time.perf_counter() - t0
        t0 = time.perf_counter()
        table = stage.process(batch, spec)
        staged = time.perf_counter() - t0
        same = all(
            np.array_equal(decode_rgb(ctx.store.get_blob(b)), o)
            for b, o in zip(table["blob"].to_pylist(), outs, strict=True)
        )
    print(f"{a.n} images at {a.size}², split={a.split}, one thread")
    print(f"bare ops        {bare:7.2f}s  ({a.n / bare:5.1f} img/s)")
    print(f"stage process() {staged:7.2f}s  ({a.n / staged:5.1f} img/s), identical pixels: {same}")
    print(
        f"stage overhead  {staged / bare - 1:+.1%} (goal <= 20 %); of which PSNR/SSIM quality rows {q / bare:.1%}"
    )


if __name__ == "__main__":
    main()
