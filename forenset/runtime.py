"""Process-level tuning for image workers.

glibc serves every array over its mmap threshold (128 KiB at first, adapted upwards only
after a large block is freed) with a fresh ``mmap`` and returns it on ``free``. A perturbation
or diff op allocates and drops several full-size float buffers per image, so each one costs a
round of kernel page faults and page zeroing. That was 7 % of worker CPU in
``bench/perturb.py``, and it is memory traffic that two workers on one socket fight over.
Raising the thresholds keeps freed buffers in the heap for the next image (``mallopt`` takes
effect immediately, for the whole process; it is idempotent).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading
from typing import Any

M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 64 << 20  # blocks under 64 MiB come from the heap (a 4K RGB float32 is 48 MiB)
TRIM_THRESHOLD = 256 << 20  # keep up to 256 MiB of freed heap instead of returning it at once
TOP_PAD = 16 << 20

_done: bool | None = None
_lock = threading.Lock()


def tune_allocator() -> bool:
    """Apply the thresholds once per process; True where they took effect (glibc only)."""
    global _done
    with _lock:
        if _done is None:
            _done = _mallopt()
        return _done


def _mallopt() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        libc = ctypes.CDLL(name)
        fn = libc.mallopt
    except (OSError, AttributeError):  # musl and other libcs have no mallopt
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return all(
        fn(opt, val) == 1
        for opt, val in (
            (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
            (M_TOP_PAD, TOP_PAD),
        )
    )


# transformers 5 resolves its top-level names lazily, and that is not thread-safe: four
# threads importing AutoTokenizer / AutoModel at once fail with "cannot import name ..."
# (measured 5 of 5 times on transformers 5.25). Stage shards run in worker threads, so every
# import of a transformers name goes through this lock (the scorers also load under it).
HF_LOCK = threading.RLock()


def transformers_names(*names: str) -> tuple[Any, ...]:
    """``from transformers import <names>``, under the process's import lock."""
    with HF_LOCK:
        import transformers

        return tuple(getattr(transformers, n) for n in names)
