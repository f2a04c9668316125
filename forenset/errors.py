"""Errors that cross layers. Kept in a module that imports nothing of forenset.

Every exception class of forenset derives from :class:`ForensetError`, so a caller (a plugin, a
notebook, an orchestrator) catches all of forenset's own failures with one ``except`` and still
lets programming errors through. Each class also keeps the builtin base it had (``ValueError``,
``RuntimeError``) so existing ``except`` clauses behave as before.
"""

from __future__ import annotations

import errno


class ForensetError(Exception):
    """Base of every error forenset raises on purpose; its message is one sentence for the user."""


class ConfigurationError(ForensetError, RuntimeError):
    """A non-retryable problem with how the build, a stage or a backend is configured (a config
    file that does not validate, a model path that does not exist, a pipeline class that cannot
    load, a missing API key).

    Raised by ``load_config`` / ``validate_config`` before a build starts (``ConfigError`` is the
    same class), and by stages and backends during it: every row of the stage would fail for the
    same reason, so it is not turned into error rows: it fails the shard, and the scheduler stops
    the build with this one-sentence message and a non-zero exit before spending the rest of the
    run."""


# The name config loading used; one class since issue 30 (it was a separate ValueError).
ConfigError = ConfigurationError


class ModelServiceError(ConfigurationError):
    """A model server answered every request of a stage with the same failure (it rejects the
    request's form, or is unreachable): the rest would fail alike, so the build stops."""


class InputRefused(ForensetError, OSError):
    """A file or URL a listing names that the read policy refuses (outside its folder, not a
    regular file, over the byte cap, a URL while remote reads are off, a private address).

    An ``OSError`` so that every reader that turns an unreadable file into an error row does the
    same with a refusal; its message is the reason, and it is never retryable."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


# errnos that say the machine ran out of something (space, quota, descriptors, memory) or its
# volume turned read-only: no row is at fault, so the shard fails and a rerun redoes it
RESOURCE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EMFILE, errno.ENFILE, errno.ENOMEM}
)
# errnos that may pass on their own (a flaky disk or network mount): retryable error rows
TRANSIENT_ERRNOS = frozenset(
    {errno.EIO, errno.EAGAIN, errno.ETIMEDOUT, errno.ECONNRESET, errno.ESTALE,
     errno.EHOSTDOWN, errno.EHOSTUNREACH}
)  # fmt: skip


def _errno_chain(exc: BaseException | None) -> list[int]:
    out = []
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno is not None:
            out.append(exc.errno)
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return out


def resource_exhausted(exc: BaseException) -> bool:
    """The machine ran out of disk space, quota, file descriptors or memory, or the volume is
    read-only (this exception or one it was raised from): not the row's fault."""
    if isinstance(exc, MemoryError):
        return True
    return any(e in RESOURCE_ERRNOS for e in _errno_chain(exc))


def transient(exc: BaseException) -> bool:
    """A failure that a later attempt may not meet: resource exhaustion, I/O errors of a flaky
    device or mount, timeouts. Rows that fail with it are retryable, never terminal."""
    if resource_exhausted(exc) or isinstance(exc, TimeoutError):
        return True
    return any(e in TRANSIENT_ERRNOS for e in _errno_chain(exc))


class RunnerUnavailable(ConfigurationError):
    """A stage's task runner could not start or connect (a Dask scheduler or Ray cluster that
    is down, refuses the connection or wants an authentication token). One sentence naming
    the runner, its address and the cause; the build stops before any shard runs."""


MAX_SHOWN = 300  # characters of an id or reason quoted in a row, state.json, a log or a message


def clip(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` cut to ``limit`` characters with a marker saying how many were left out.

    Why: a record's id or a reason can be megabytes long (a hostile release's 5,000,000-character
    ``image_id``); quoted whole it would fill state.json, the build log and every message."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters]"
