"""Errors that cross layers. Kept in a module that imports nothing of forenset."""

from __future__ import annotations


class ConfigurationError(RuntimeError):
    """A non-retryable problem with how a stage or backend is configured (a model path that does
    not exist, a pipeline class that cannot load, a missing API key).

    Every row of the stage would fail for the same reason, so it is not turned into error rows:
    it fails the shard, and the scheduler stops the build with this one-sentence message and a
    non-zero exit before spending the rest of the run."""


class RunnerUnavailable(ConfigurationError):
    """A stage's task runner could not start or connect (a Dask scheduler or Ray cluster that
    is down, refuses the connection or wants an authentication token). One sentence naming
    the runner, its address and the cause; the build stops before any shard runs."""
