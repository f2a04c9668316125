"""Chat backends by name: the one place a pool entry's ``backend:`` is resolved.

Why a registry: the built-in backends (``offline``, ``openai``, ``gemini``) and third-party
ones register the same way, as image backends do (``forenset.backends.image.factory``): a
plugin package adds a chat backend by being installed::

    [project.entry-points."forenset.chat_backends"]
    mychat = "mychat_plugin:MyChat"

The entry point names a class whose instances have ``name`` and ``async complete(spec, req,
extra) -> RawReply`` (``forenset.backends.llm.base.ChatBackend``), built with no arguments
once per process by the engine. :func:`register` does the same in process (tests, notebooks).

The built-ins are named here by import path, so validating a config needs no installed
metadata and imports no SDK; a backend's module is imported when the engine first uses it.
"""

from __future__ import annotations

import importlib
from typing import Any

from forenset.errors import ConfigurationError
from forenset.plugins import entry_points_by_name

GROUP = "forenset.chat_backends"

BUILTIN: dict[str, str] = {
    "offline": "forenset.backends.llm.offline:OfflineChat",
    "openai": "forenset.backends.llm.openai_chat:OpenAIChat",
    "gemini": "forenset.backends.llm.gemini_chat:GeminiChat",
}

_REGISTERED: dict[str, Any] = {}


def names() -> list[str]:
    """Every chat backend name: the built-ins, then plugins; imports no backend."""
    plugins = sorted((set(entry_points_by_name(GROUP)) | set(_REGISTERED)) - set(BUILTIN))
    return [*BUILTIN, *plugins]


def register(name: str, cls: Any) -> None:
    """Register a chat backend class in process under ``name`` (not a built-in's name)."""
    if name in BUILTIN:
        raise ValueError(f"chat backend {name!r} is a built-in")
    if not callable(getattr(cls, "complete", None)):
        raise ValueError(f"chat backend {name!r} ({cls!r}) has no complete() method")
    _REGISTERED[name] = cls


def unregister(name: str) -> None:
    _REGISTERED.pop(name, None)


def unknown_backend(name: str) -> str:
    """The one-sentence reason (no final period) that ``name`` names no chat backend."""
    return f"unknown chat backend {name!r} (known: {', '.join(names())})"


def check_name(name: str) -> str:
    """``name`` when a backend is registered under it, else ValueError (config validation)."""
    if name not in BUILTIN and name not in _REGISTERED and name not in entry_points_by_name(GROUP):
        raise ValueError(unknown_backend(name))
    return name


def backend_class(name: str) -> Any:
    """The class registered as ``name``, imported on first use; ConfigurationError (one
    sentence) for an unknown name or a plugin that does not load."""
    if name in BUILTIN:
        module, _, attr = BUILTIN[name].partition(":")
        return getattr(importlib.import_module(module), attr)
    if name in _REGISTERED:
        return _REGISTERED[name]
    eps = entry_points_by_name(GROUP).get(name)
    if not eps:
        raise ConfigurationError(unknown_backend(name) + ".")
    try:
        cls = eps[0].load()
    except Exception as exc:
        raise ConfigurationError(
            f"Chat backend {name!r} ({eps[0].value}) could not be loaded: "
            f"{type(exc).__name__}: {exc}."
        ) from exc
    if not callable(getattr(cls, "complete", None)):
        raise ConfigurationError(f"Chat backend {name!r} ({eps[0].value}) has no complete().")
    return cls


def create(name: str) -> Any:
    """A new backend instance (the engine keeps one per name and process)."""
    return backend_class(name)()


class Backends(dict[str, Any]):
    """The engine's backends by name, each built on first use."""

    def __missing__(self, name: str) -> Any:
        self[name] = create(name)
        return self[name]
