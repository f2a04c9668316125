"""Image backends by name: the one place a generator's ``backend:`` is resolved.

Why entry points: the built-in backends and third-party generators register the same way, in
the ``forenset.image_backends`` group (see pyproject.toml), so a plugin package adds a
generator by being installed, as simonw/llm plugins add models::

    [project.entry-points."forenset.image_backends"]
    mygen = "mygen_plugin:MyGenerator"

The entry point names a *backend class*: it says what it can do (``tasks``, a subset of
{"edit", "t2i"}, or a ``tasks_for(generator)`` classmethod when that depends on the config)
and builds itself from a GeneratorConfig (``from_generator``); its instances have ``name``,
``generate`` and ``edit`` (forenset.backends.image.base.ImageBackend). Plugin-specific
settings travel in the generator's ``options`` mapping.

Lazy by design: listing and validating names reads package metadata only; a backend's module
(and its SDK, torch or diffusers) is imported when that backend is first asked for its tasks
or built.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import TYPE_CHECKING, Any, Protocol

from forenset.errors import ConfigurationError
from forenset.plugins import entry_points_by_name

if TYPE_CHECKING:
    from forenset.backends.image.base import ImageBackend

GROUP = "forenset.image_backends"
TASKS = frozenset({"edit", "t2i", "import"})  # import: edits made elsewhere (external.py)


class Generator(Protocol):
    """What the factory reads of a generator's config (``generator.GeneratorConfig``, which
    imports this module to validate ``backend``)."""

    @property
    def backend(self) -> str: ...

    def model_dump_json(self) -> str: ...


_LOADED: dict[tuple[str, str], Any] = {}


def names() -> list[str]:
    """The registered backend names, sorted; imports no backend."""
    return sorted(entry_points_by_name(GROUP))


def unknown_backend(name: str) -> str:
    """The one-sentence reason (no final period) that ``name`` names no backend."""
    known = names()
    if not known:
        return (
            f"unknown image backend {name!r}: no image backends are registered "
            "(reinstall forenset: pip install -e .)"
        )
    return f"unknown image backend {name!r} (known: {', '.join(known)})"


def check_name(name: str) -> str:
    """``name`` when a backend is registered under it, else ValueError (config validation)."""
    if name not in entry_points_by_name(GROUP):
        raise ValueError(unknown_backend(name))
    return name


def backend_class(name: str) -> Any:
    """The class registered as ``name``, imported on first use.

    Raises ConfigurationError (one sentence) for an unknown name, a name registered by two
    packages, or an entry point that does not load."""
    eps = entry_points_by_name(GROUP).get(name)
    if not eps:
        raise ConfigurationError(unknown_backend(name) + ".")
    if len({ep.value for ep in eps}) > 1:
        where = ", ".join(sorted(f"{_dist(ep)} ({ep.value})" for ep in eps))
        raise ConfigurationError(
            f"Image backend {name!r} is registered by more than one package: {where}."
        )
    ep = eps[0]
    key = (ep.name, ep.value)
    if key not in _LOADED:
        try:
            cls = ep.load()
        except Exception as exc:
            raise ConfigurationError(
                f"Image backend {name!r} ({ep.value}, from {_dist(ep)}) could not be loaded: "
                f"{type(exc).__name__}: {exc}."
            ) from exc
        if not callable(getattr(cls, "from_generator", None)):
            raise ConfigurationError(
                f"Image backend {name!r} ({ep.value}) has no from_generator(generator) method."
            )
        _LOADED[key] = cls
    return _LOADED[key]


def tasks_for(generator: Generator) -> set[str]:
    """What ``generator`` can do: 'edit' (photos + instructions) and/or 't2i' (prompts)."""
    cls = backend_class(generator.backend)
    declared = getattr(cls, "tasks_for", None)
    tasks = set(declared(generator) if callable(declared) else getattr(cls, "tasks", ()))
    if not tasks or not tasks <= TASKS:
        raise ConfigurationError(
            f"Image backend {generator.backend!r} declares tasks {sorted(tasks)}; "
            f"expected a non-empty subset of {sorted(TASKS)}."
        )
    return tasks


def edit_kinds_for(generator: Generator) -> frozenset[str]:
    """The instruction kinds ``generator`` can execute: its class's ``edit_kinds`` (every kind
    of forenset.text.models when a plugin declares none). Instructions of other kinds are not
    sent to it."""
    from forenset.text.models import ALL_KINDS

    declared = getattr(backend_class(generator.backend), "edit_kinds", None)
    return frozenset(ALL_KINDS if declared is None else declared)


def create(generator: Generator) -> ImageBackend:
    """A new backend for ``generator`` (callers cache it: a backend may hold a loaded model).

    Configuration problems known before any request raise ConfigurationError."""
    return backend_class(generator.backend).from_generator(generator)


# One backend (e.g. a loaded pipeline) per generator config per process, shared by every stage
# that generates images (candidates, and a benchmark family's own image stages).
_SHARED: dict[str, ImageBackend] = {}


def shared(generator: Generator) -> ImageBackend:
    """The process's backend for ``generator``, built once by :func:`create`."""
    key = generator.model_dump_json()
    if key not in _SHARED:
        _SHARED[key] = create(generator)
    return _SHARED[key]


def _dist(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else "an unknown package"
