"""A local filesystem that runs out of space or turns read-only, for run-store fault tests.

Registered with fsspec as ``faultyfile://``. The fault state lives on the class because fsspec
caches filesystem instances: ``FaultyFS.configure(...)`` before a run, ``reset()`` after.
"""

from __future__ import annotations

import errno
import os
import threading
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileOpener, LocalFileSystem

PROTOCOL = "faultyfile"


class FaultyFS(LocalFileSystem):
    """Writes succeed until ``budget`` bytes were written (then ENOSPC), or fail at once (EROFS)."""

    protocol = PROTOCOL
    budget: int | None = None  # bytes that may still be written; None = unlimited
    read_only = False
    written = 0
    refused: list[str] = []
    _lock = threading.Lock()

    @classmethod
    def configure(cls, *, budget: int | None = None, read_only: bool = False) -> None:
        with cls._lock:
            cls.budget, cls.read_only, cls.written, cls.refused = budget, read_only, 0, []

    @classmethod
    def reset(cls) -> None:
        cls.configure()

    @classmethod
    def allowance(cls, path: str, n: int) -> int:
        """How many of ``n`` bytes for ``path`` fit in the budget (all of them when unlimited)."""
        with cls._lock:
            fit = n if cls.budget is None else max(0, min(n, cls.budget - cls.written))
            cls.written += fit
            if fit < n:
                cls.refused.append(path)
            return fit

    @classmethod
    def refuse_if_read_only(cls, path: str) -> None:
        if cls.read_only:
            with cls._lock:
                cls.refused.append(path)
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)

    def _open(self, path: str, mode: str = "rb", block_size: Any = None, **kwargs: Any):
        path = self._strip_protocol(path)
        if any(c in mode for c in "wxa+"):
            self.refuse_if_read_only(path)
            if self.auto_mkdir:
                self.makedirs(self._parent(path), exist_ok=True)
            return _BudgetedFile(path, mode, fs=self, **kwargs)
        return LocalFileOpener(path, mode, fs=self, **kwargs)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        path = self._strip_protocol(path)
        if not os.path.isdir(path):
            self.refuse_if_read_only(path)
        os.makedirs(path, exist_ok=exist_ok)

    def mv(self, path1: str, path2: str, **kwargs: Any) -> None:
        self.refuse_if_read_only(self._strip_protocol(path2))
        super().mv(path1, path2, **kwargs)


class _BudgetedFile(LocalFileOpener):
    """Writes what fits, then fails like a full disk: a half-written file is left behind."""

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        fit = FaultyFS.allowance(self.path, len(view))
        if fit:
            super().write(view[:fit])
        if fit < len(view):
            self.f.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.path)
        return fit


def register() -> None:
    fsspec.register_implementation(PROTOCOL, FaultyFS, clobber=True)
