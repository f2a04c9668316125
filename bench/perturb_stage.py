"""Overhead of the perturbations *stage* over the bare catalogue ops (goal <= 20 %).

Same images, same seeds, one process, one thread, measured side by side:
(a) ops only: `perturb_image` on decoded arrays, nothing read or written;
(b) bare loop: what a script without forenset does for the same outputs: read the PNG file,
    decode, the same ops, PSNR/SSIM, encode and write a PNG file per variant;
(c) the stage's `process()` on a shard of rows: blob read + decode, the same ops, PSNR/SSIM
    quality rows (the configured SSIM, default Wang's downsampled-luma recipe), encode + content-addressed blob write, seeds, op records, Arrow table.
Prints (c)/(b) (the stage's own overhead), (c)/(a), and what decode, quality and encode cost
per image, so the share of each is visible.

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
from forenset.runtime import tune_allocator
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
    ap.add_argument("--system-allocator", action="store_true", help="skip tune_allocator()")
    a = ap.parse_args()
    cv2.setNumThreads(1)
    tuned = tune_allocator() if not a.system_allocator else False
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
        for im, out in zip(imgs, outs, strict=True):
            quality(im, out, "skimage")
        q_sk = time.perf_counter() - t0
        files = []
        for i, r in enumerate(rows):
            path = f"{d}/in-{i}.png"
            with open(path, "wb") as fh:
                fh.write(ctx.store.get_blob(r["blob"]))
            files.append(path)
        t0 = time.perf_counter()
        for i, (path, s) in enumerate(zip(files, seeds, strict=True)):
            with open(path, "rb") as fh:
                im = decode_rgb(fh.read())
            out = perturb_image(im, split=a.split, seed=s, config=pcfg)[0]
            quality(im, out)
            with open(f"{d}/out-{i}.png", "wb") as fh:
                fh.write(encode_png(out))
        loop = time.perf_counter() - t0
        pngs = [encode_png(o) for o in outs]
        t0 = time.perf_counter()
        for p in pngs:
            decode_rgb(p)
        dec = time.perf_counter() - t0
        t0 = time.perf_counter()
        for o in outs:
            encode_png(o)
        enc = time.perf_counter() - t0
        t0 = time.perf_counter()
        table = stage.process(batch, spec)
        staged = time.perf_counter() - t0
        same = all(
            np.array_equal(decode_rgb(ctx.store.get_blob(b)), o)
            for b, o in zip(table["blob"].to_pylist(), outs, strict=True)
        )
    ms = 1000 / a.n
    print(f"{a.n} images at {a.size}², split={a.split}, one thread, allocator tuned: {tuned}")
    print(f"(a) ops only      {bare:7.2f}s  ({a.n / bare:5.1f} img/s)")
    print(f"(b) bare loop     {loop:7.2f}s  ({a.n / loop:5.1f} img/s)")
    print(f"(c) stage process {staged:7.2f}s  ({a.n / staged:5.1f} img/s), identical: {same}")
    print(f"stage over bare loop (c)/(b) {staged / loop - 1:+.1%} (goal <= 20 %)")
    print(f"stage over ops only  (c)/(a) {staged / bare - 1:+.1%}")
    print(
        f"per image: ops {bare * ms:.1f} ms, decode {dec * ms:.1f} ms, PSNR/SSIM {q * ms:.1f} ms,"
        f" encode {enc * ms:.1f} ms ({sum(map(len, pngs)) / a.n / 1024:.0f} KiB)"
    )
    print(
        f"PSNR/SSIM with ssim='{pcfg.ssim}' {q * ms:.1f} ms vs ssim='skimage' (per RGB channel, "
        f"full size) {q_sk * ms:.1f} ms per image"
    )


if __name__ == "__main__":
    main()
