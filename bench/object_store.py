"""The demo on S3 (moto on 127.0.0.1) against the demo on local disk, same machine, same run.

Goals (issue 29): requests per committed object <= 3, and S3 build time / local build time
<= 1.3. Requests are counted at the server (moto's access log: one line per HTTP request), so
every process of the build counts, Dask workers included; committed objects are those the
bucket holds after the build (blobs, shards, manifests, state, exports, lock excluded). Each
build is the `forenset build` CLI from an empty run directory, timed wall-clock; builds
alternate local / S3 so that load from other users hits both alike.

    PYTHONPATH=$PWD python bench/object_store.py [--config demo.yaml] [--repeats 2]
        [--code <checkout of another commit>]   # builds run that commit's code (before/after)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from forenset.testing.s3server import MotoServer

ROOT = Path(__file__).resolve().parents[1]


def build(run_dir: str, config: str | None, env: dict[str, str]) -> float:
    cmd = [sys.executable, "-m", "forenset.cli", "build", "--run-dir", run_dir]
    if config:
        cmd.insert(4, str(Path(config).resolve()))
    t0 = time.perf_counter()
    # cwd: not this checkout, whose forenset `python -m` would import before PYTHONPATH's
    p = subprocess.run(
        cmd, env=env, capture_output=True, text=True, check=False, cwd=env["PREFECT_HOME"]
    )
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"build of {run_dir} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return dt


def kinds(lines: list[str]) -> Counter:
    """Request lines as 'METHOD area' (area: blobs, stages, _tmp, the bucket itself...)."""
    out: Counter = Counter()
    for ln in lines:
        try:
            method, path = ln.split('"', 2)[1].split()[:2]
        except ValueError:
            continue
        parts = path.split("?")[0].strip("/").split("/")
        area = parts[2] if len(parts) > 2 else ("bucket" if len(parts) == 1 else parts[-1])
        out[f"{method} {area}"] += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None, help="build config (default: the demo)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--code", default=str(ROOT), help="checkout whose forenset the builds run")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-object-store-"))
    (tmp / "prefect").mkdir()
    base_env = {
        **os.environ,
        "PYTHONPATH": str(Path(args.code).resolve()),
        "PREFECT_HOME": str(tmp / "prefect"),
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    }
    base_env.pop("FORENSET_STORAGE", None)
    local_t, s3_t, per_object = [], [], []
    with MotoServer(tmp) as s3:
        env = {**base_env, **s3.env()}
        import s3fs

        for i in range(args.repeats):
            local_dir = tmp / f"local-{i}"
            local_t.append(build(str(local_dir), args.config, base_env))
            bucket = f"bench-{i}"
            s3.create_bucket(bucket)
            before = s3.requests()
            s3_t.append(build(f"s3://{bucket}/demo", args.config, env))
            lines = s3.request_lines()[before:]
            fs = s3fs.S3FileSystem(
                endpoint_url=s3.endpoint,
                key=env["AWS_ACCESS_KEY_ID"],
                secret=env["AWS_SECRET_ACCESS_KEY"],
                skip_instance_cache=True,
            )
            objects = [p for p in fs.find(f"{bucket}/demo") if not p.endswith("build.lock")]
            per_object.append(len(lines) / max(1, len(objects)))
            print(
                f"run {i + 1}: local {local_t[-1]:.1f} s, s3 {s3_t[-1]:.1f} s, "
                f"{len(lines)} requests for {len(objects)} objects "
                f"({per_object[-1]:.2f} per object)",
                flush=True,
            )
            if i == 0:
                for k, n in kinds(lines).most_common(12):
                    print(f"    {n:6d}  {k}")
            shutil.rmtree(local_dir, ignore_errors=True)
    ratio = statistics.median(s / loc for s, loc in zip(s3_t, local_t, strict=True))
    print(
        f"requests per committed object: {statistics.median(per_object):.2f} (goal <= 3)\n"
        f"S3-on-loopback build time / local build time: {ratio:.2f} (goal <= 1.3; "
        f"median of {args.repeats} alternating pairs)"
    )
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
