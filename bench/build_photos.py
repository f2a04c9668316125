"""A build over a folder of large photos: seconds per stage per photo and peak RSS.

The photos are made here, reproducibly, from the photographs bundled with scikit-image and
scikit-learn: each is cropped, flipped and colour-jittered, upscaled (bicubic) to a long side
drawn log-uniformly in 1024..8192 px with the source's aspect ratio, given film-grain noise and a
fine texture so that it compresses like a camera photo (no smooth upscaling blur), and saved as
JPEG (half of them, quality 85-95, some with an EXIF rotation), PNG or WebP. They are kept in
``--photos-dir`` and reused by later runs.

Each build runs in a child process (so its peak RSS is its own) with the offline backends through
the real scheduler on a bare thread pool (``flows.local.run_local``: stage work, not Prefect's):
sources (hash + decode + normalise to ``--max-side``) → captions → instructions → candidates →
diffs → judgments → verdicts → splits → perturbations → explanations, one generator. ``--ref DIR``
builds the same folder first with another checkout of forenset (e.g. ``git worktree add /tmp/base
<commit>``), so before/after figures come from one invocation on one machine.

    PYTHONPATH=$PWD python bench/build_photos.py [--photos 120] [--max-side 512] [--ref /tmp/base]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

FORMATS = ("JPEG", "PNG", "JPEG", "WEBP")


def base_photos() -> list[np.ndarray]:
    """The bundled sample photographs (forenset/data/samples.yaml), as RGB arrays."""
    import cv2

    from forenset.tasks.sources import load_sample_bytes, sample_manifest

    out = []
    for s in sample_manifest():
        arr = cv2.imdecode(
            np.frombuffer(load_sample_bytes(s["loader"]), np.uint8), cv2.IMREAD_COLOR
        )
        if arr is not None and min(arr.shape[:2]) >= 256:
            out.append(np.ascontiguousarray(arr[..., ::-1]))
    return out


def make_photo(base: np.ndarray, i: int) -> tuple[bytes, str, tuple[int, int]]:
    """One large photo: crop, flip, jitter, upscale, grain + texture, encode."""
    import cv2
    from PIL import Image

    rng = np.random.default_rng(1000 + i)
    h, w = base.shape[:2]
    ch, cw = int(h * rng.uniform(0.7, 1.0)), int(w * rng.uniform(0.7, 1.0))
    y, x = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
    img = base[y : y + ch, x : x + cw]
    if rng.random() < 0.5:
        img = img[:, ::-1]
    long_side = int(np.exp(rng.uniform(np.log(1024), np.log(8192))))
    scale = long_side / max(ch, cw)
    size = (max(1, round(cw * scale)), max(1, round(ch * scale)))
    big = cv2.resize(np.ascontiguousarray(img), size, interpolation=cv2.INTER_CUBIC)
    gain = rng.uniform(0.9, 1.1, 3).astype(np.float32)
    grain = rng.normal(0, rng.uniform(2, 6), (size[1], size[0], 1)).astype(np.float32)
    tex = cv2.resize(
        rng.normal(0, 4, (size[1] // 3 + 1, size[0] // 3 + 1)).astype(np.float32),
        size,
        interpolation=cv2.INTER_LINEAR,
    )[..., None]
    arr = np.clip(big.astype(np.float32) * gain + grain + tex, 0, 255).astype(np.uint8)
    fmt = FORMATS[i % len(FORMATS)]
    im = Image.fromarray(arr)
    buf = io.BytesIO()
    if fmt == "JPEG":
        exif = Image.Exif()
        if i % 8 == 0:
            exif[0x0112] = 6  # a portrait shot stored sideways, as phones do
        im.save(buf, "JPEG", quality=int(rng.integers(85, 96)), exif=exif.tobytes())
    elif fmt == "PNG":
        im.save(buf, "PNG", compress_level=1)
    else:  # libwebp refuses some very large frames (partition 0 overflow): lower the quality
        for q in (90, 75, 50):
            try:
                im.save(buf, "WEBP", quality=q, method=0)
                break
            except ValueError:
                buf = io.BytesIO()
    return buf.getvalue(), fmt, size


def ensure_photos(folder: Path, n: int) -> dict:
    """Make (or reuse) ``n`` photos in ``folder``; returns what the folder holds."""
    marker = folder / "_photos.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        if info.get("n") == n:
            return info
    folder.mkdir(parents=True, exist_ok=True)
    bases = base_photos()
    t0 = time.perf_counter()
    sizes, fmts, total = [], {}, 0
    for i in range(n):
        fmt = FORMATS[i % len(FORMATS)]
        path = folder / f"photo-{i:04d}.{ {'JPEG': 'jpg', 'PNG': 'png', 'WEBP': 'webp'}[fmt] }"
        if path.exists():  # made by an interrupted earlier run (deterministic): keep it
            from PIL import Image

            with Image.open(path) as im:
                size = im.size
            data = path.read_bytes()
        else:
            data, fmt, size = make_photo(bases[i % len(bases)], i)
            path.write_bytes(data)
        sizes.append(size)
        fmts[fmt] = fmts.get(fmt, 0) + 1
        total += len(data)
    mp = [w * h / 1e6 for w, h in sizes]
    info = {
        "n": n,
        "formats": fmts,
        "megapixels": {"min": min(mp), "median": float(np.median(mp)), "max": max(mp)},
        "long_side": {"min": min(max(s) for s in sizes), "max": max(max(s) for s in sizes)},
        "bytes": total,
        "made_in_s": round(time.perf_counter() - t0, 1),
    }
    marker.write_text(json.dumps(info))
    return info


def build_config(photos: Path, run_dir: str, max_side: int) -> dict:
    return {
        "seed": 11,
        "run_dir": run_dir,
        "shard_size": 8,
        "sources": {
            "samples": "none",
            "folders": [str(photos)],
            "max_side": max_side,
            "max_pixels": 80_000_000,  # the largest photos (~65 MP) are decoded, not refused
        },
        "instructions": {"min_edits": 2, "max_edits": 2},
        "generators": [{"name": "cv-telea", "family": "classical", "inpaint": "telea"}],
        "splits": {"fractions": {"train": 0.6, "validation": 0.2, "test": 0.2}},
        "perturbations": {"variants": 1},
        "scenarios": {"per_category": 1, "categories": ["P1"]},
        "runners": {"default": {"kind": "threads", "max_workers": 2}},
    }


def child(photos: Path, max_side: int, workers: int) -> None:
    """One build in this process; prints its figures as JSON on the last line."""
    from forenset.config import validate_config
    from forenset.flows.local import run_local

    with tempfile.TemporaryDirectory(prefix="forenset-photos-run-") as tmp:
        cfg = validate_config(build_config(photos, tmp, max_side))
        t0 = time.perf_counter()
        _, stats, _ = run_local(cfg, workers=workers)
        wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = {
        "wall_s": round(wall, 2),
        "peak_rss_mib": round(rss),
        "stages": {
            n: {"seconds": round(s.seconds, 2), "rows": s.rows, "ok": s.ok, "error": s.error}
            for n, s in stats.items()
            if s.planned
        },
    }
    print(json.dumps(out))


def run_child(code_root: str, photos: Path, max_side: int, workers: int) -> dict:
    env = dict(os.environ, PYTHONPATH=code_root, OMP_NUM_THREADS="1")
    cmd = [sys.executable, __file__, "--child", "--photos-dir", str(photos)]
    cmd += ["--max-side", str(max_side), "--workers", str(workers)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if p.returncode != 0:
        raise SystemExit(f"build with {code_root} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def report(label: str, res: dict, n: int) -> None:
    print(f"\n{label}: wall {res['wall_s']:.1f} s, peak RSS {res['peak_rss_mib']} MiB")
    print(f"  {'stage':<14}{'rows':>7}{'errors':>7}{'s total':>9}{'s/photo':>9}")
    for name, s in res["stages"].items():
        print(
            f"  {name:<14}{s['rows']:>7}{s['error']:>7}{s['seconds']:>9.2f}{s['seconds'] / n:>9.3f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--photos", type=int, default=120)
    ap.add_argument("--photos-dir", type=Path, default=None)
    ap.add_argument("--max-side", type=int, default=512)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--ref", default=None, help="another forenset checkout to build with first")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    folder = a.photos_dir or Path(tempfile.gettempdir()) / f"forenset-photos-{a.photos}"
    if a.child:
        child(folder, a.max_side, a.workers)
        return
    info = ensure_photos(folder, a.photos)
    print(f"{info['n']} photos in {folder}: {info['formats']}, {info['bytes'] / 1e6:.0f} MB, ")
    print(f"  megapixels {info['megapixels']}, long side {info['long_side']}")
    here = str(Path(__file__).resolve().parent.parent)
    runs = ([("before (" + a.ref + ")", a.ref)] if a.ref else []) + [("this checkout", here)]
    results = {}
    for label, root in runs:
        results[label] = run_child(root, folder, a.max_side, a.workers)
        report(label, results[label], info["n"])
    if a.ref:
        (b, before), (_, after) = list(results.items())
        print("\nafter / before (stage work seconds):")
        for name, s in after["stages"].items():
            old = before["stages"].get(name, {}).get("seconds", 0)
            if old:
                print(f"  {name:<14}{s['seconds'] / old:>6.2f}")
        print(f"  {'wall':<14}{after['wall_s'] / before['wall_s']:>6.2f}")
        print(f"  {'peak RSS':<14}{after['peak_rss_mib'] / before['peak_rss_mib']:>6.2f}")


if __name__ == "__main__":
    main()
