"""Errors that cross layers. Kept in a module that imports nothing of forenset."""

from __future__ import annotations


class ConfigurationError(RuntimeError):
    """A non-retryable problem with how a stage or backend is configured (a model path that does
    not exist, a pipeline class that cannot load, a missing API key).

    Every row of the stage would fail for the same reason, so it is not turned into error rows:
    it fails the shard, and the scheduler stops the build with this one-sentence message and a
    non-zero exit before spending the rest of the run."""


class InputRefused(OSError):
    """A file or URL a listing names that the read policy refuses (outside its folder, not a
    regular file, over the byte cap, a URL while remote reads are off, a private address).

    An ``OSError`` so that every reader that turns an unreadable file into an error row does the
    same with a refusal; its message is the reason, and it is never retryable."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason
