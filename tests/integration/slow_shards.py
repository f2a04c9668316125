"""Dask worker preload for the lost-worker tests: every diffs shard takes at least two seconds,
so a worker can be killed while it holds one (``dask worker --preload``)."""

from __future__ import annotations

import time

from forenset.tasks.diffs import Diffs

_real = Diffs.process


def _slow(self, batch, spec):
    time.sleep(2.0)
    return _real(self, batch, spec)


Diffs.process = _slow
