"""Errors that cross layers. Kept in a module that imports nothing of forenset.

Every exception class of forenset derives from :class:`ForensetError`, so a caller (a plugin, a
notebook, an orchestrator) catches all of forenset's own failures with one ``except`` and still
lets programming errors through. Each class also keeps the builtin base it had (``ValueError``,
``RuntimeError``) so existing ``except`` clauses behave as before.
"""

from __future__ import annotations


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
