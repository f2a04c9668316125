#!/usr/bin/env bash
# Run HERE (not on the device): download into .whl/ the wheels the GPU image lacks for
# bench/generate.py (see /work/.library/device/KINDS.md for what it holds: torch,
# transformers, accelerate, opencv, pillow, numpy, pyarrow are there; diffusers and pydantic
# are not). The device's python3 is CPython 3.12 on x86-64. .whl/ is git-ignored and travels
# with `carry: [".whl"]` (about 9 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl \
  diffusers==0.42.1 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 \
  typing-inspection==0.4.5 importlib-metadata==10.2.0
ls -l .whl
