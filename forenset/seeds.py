"""Stable seeds: every random choice derives from (build seed, stage, item, ...) via BLAKE2b.

Python's ``hash()`` is salted per process, so it must never feed an RNG here.
"""

from __future__ import annotations

import hashlib

import numpy as np


def derive_seed(*parts: object) -> int:
    """Return a 63-bit seed from any parts (ints, strings); order matters."""
    h = hashlib.blake2b(digest_size=8)
    for p in parts:
        h.update(repr(p).encode("utf-8"))
        h.update(b"\x1f")
    return int.from_bytes(h.digest(), "big") & ((1 << 63) - 1)


def rng_for(*parts: object) -> np.random.Generator:
    """A numpy Generator seeded from ``derive_seed(*parts)``."""
    return np.random.Generator(np.random.PCG64(derive_seed(*parts)))
