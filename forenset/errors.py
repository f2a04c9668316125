"""Errors that cross layers. Kept in a module that imports nothing of forenset."""

from __future__ import annotations


class ConfigurationError(RuntimeError):
    """A non-retryable problem with how a stage or backend is configured (a model path that does
    not exist, a pipeline class that cannot load, a missing API key).

    Every row of the stage would fail for the same reason, so it is not turned into error rows:
    it fails the shard, and the scheduler stops the build with this one-sentence message and a
    non-zero exit before spending the rest of the run."""


class ModelServiceError(ConfigurationError):
    """A model server answered every request of a stage with the same failure (it rejects the
    request's form, or is unreachable): the rest would fail alike, so the build stops."""
