#!/usr/bin/env bash
# The issue-21 GPU figures in one device call (one short prepared script, docs/generation.md):
#   here:       bash bench/gpu_wheels.sh
#   device run: command "bash bench/gpu_check.sh", carry [".whl"], timeout_s 600
# Installs the carried wheels into /tmp/site, prints the GPU, then bench/generate.py's
# end-to-end edit comparison (InstructPix2Pix at SD 1.5 size, random weights saved with
# save_pretrained and loaded through the backend; 32 edits, 512², 20 steps, bf16, batch 1 and
# 8): backend with overlap on / off, raw diffusers, denoiser-only bound. Everything printed is
# also in $OUT/gpu_check.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp}
LOG="$OUT/gpu_check.log"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import torch, diffusers, transformers; print('torch', torch.__version__, 'diffusers', diffusers.__version__, 'transformers', transformers.__version__)"
} 2>&1 | tee "$LOG"
timeout "${GPU_CHECK_TIMEOUT:-540}" python3 bench/generate.py --gpu --e2e-only "$@" 2>&1 \
  | grep -v -e "it/s]" -e "s/it]" | tee -a "$LOG"
