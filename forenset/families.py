"""Benchmark families: one registration object per family, found through entry points.

A family (a benchmark: its stages, metrics, commands, report section, exports and tables) is
one package that exposes a :class:`Family` and registers it in the ``forenset.families``
entry-point group (``name = "package:FAMILY"``). Core modules loop over :func:`families` and
name none: adding a benchmark is adding a package. Every part is an import path string
(``"module:attribute"``), loaded on demand, so listing families (``forenset --help``,
``forenset query``) imports no stage, scorer or report code.

The built-in families are also listed in ``forenset.benchmarks.BUILTIN``, read when the
installed metadata predates the group (an editable install made before it existed).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from forenset.errors import ForensetError
from forenset.plugins import entry_points_by_name

GROUP = "forenset.families"
# The package whose ``BUILTIN`` (family name -> "module:FAMILY") lists the built-in families.
BUILTIN_PACKAGE = "forenset.benchmarks"


class FamilyError(ForensetError, RuntimeError):
    """A family registration is inconsistent (not a Family, a clashing name or stage)."""


def _frozen(m: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(m))


@dataclass(frozen=True)
class Family:
    """What a benchmark family contributes, each part named by ``"module:attribute"``.

    ``stages``: stage name -> stage class, in topological order (placed after the stages they
    read). ``config_section`` / ``config``: the build-config section its stages own and its
    model (documentation and checks: the section is added by the stage whose ``config_model``
    it is). ``metrics``: metric name -> scorer, in display order (the scoring registry lists
    them under ``name``). ``cli``: a Typer app mounted at top level. ``report``: a function
    ``(store, con) -> str`` returning the family's HTML section ("" when it has nothing).
    ``responder_kinds``: the shared responder kinds its model lists accept
    (``forenset.benchmarks.common.responders``); ``responders``: kinds of its own -> responder
    class. ``exports``: sample formats of ``forenset export`` and ``export.formats`` -> exporter
    ``(store, samples, out, seed=...) -> summary``; ``store_exports``: formats that read the
    run's tables themselves -> exporter ``(store, out, detector) -> summary``. ``importers``: table -> the command that writes it.
    ``predictions``: file suffix -> converter ``(bytes) -> JSONL text`` (ValueError when
    malformed), so its own submission files are ``kind: file`` predictions.
    ``labelstudio``: its Label Studio projects (key -> :class:`AnnotationProject`).
    ``tables``: tables no stage writes -> their Arrow schema (``forenset query`` types them
    before the first import). ``store_commands``: its commands that only read and write the
    run store (the CLI ends them with ``os._exit``: ``forenset.cli.FAST_EXIT``)."""

    name: str
    title: str = ""
    stages: Mapping[str, str] = field(default_factory=dict)
    config_section: str | None = None
    config: str | None = None
    metrics: Mapping[str, str] = field(default_factory=dict)
    responder_kinds: tuple[str, ...] = ()
    responders: Mapping[str, str] = field(default_factory=dict)
    cli: str | None = None
    report: str | None = None
    exports: Mapping[str, str] = field(default_factory=dict)
    store_exports: Mapping[str, str] = field(default_factory=dict)
    importers: Mapping[str, str] = field(default_factory=dict)
    predictions: Mapping[str, str] = field(default_factory=dict)
    labelstudio: Mapping[str, AnnotationProject] = field(default_factory=dict)
    tables: Mapping[str, str] = field(default_factory=dict)
    store_commands: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for f in (
            "stages",
            "metrics",
            "responders",
            "exports",
            "store_exports",
            "importers",
            "predictions",
            "labelstudio",
            "tables",
        ):
            object.__setattr__(self, f, _frozen(getattr(self, f)))


@dataclass(frozen=True)
class AnnotationProject:
    """A Label Studio project of a family (``Family.labelstudio``): ``labelstudio-setup``
    creates it from the task files that ``command`` writes into ``folder``, and
    ``labelstudio-pull`` downloads its export and prints ``then`` (``{latest}``: the export's
    path, ``{run}``: the run) — what reads it back."""

    title: str
    xml: str  # "module:attribute" of the labelling config
    task_files: tuple[str, ...]
    folder: str  # an export folder under <run>/exports (``default_out``), then a subfolder
    command: str  # the command that writes the task files (``RUN``: the run)
    then: str
    subfolder: str = ""


def load_target(target: str) -> Any:
    """The attribute a ``"module:attribute"`` string names (imports the module)."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


_CACHE: dict[str, Any] = {}


def _builtin_targets() -> dict[str, str]:
    return dict(getattr(importlib.import_module(BUILTIN_PACKAGE), "BUILTIN", {}))


def _load(name: str, target: str) -> Family:
    try:
        fam = load_target(target)
    except (ImportError, AttributeError) as e:
        raise FamilyError(f"family '{name}' ({target}) cannot be loaded: {e}") from e
    if not isinstance(fam, Family):
        raise FamilyError(f"family '{name}' ({target}) is not a forenset.families.Family")
    if fam.name != name:
        raise FamilyError(f"family '{name}' ({target}) is named {fam.name!r}")
    return fam


def _scan() -> tuple[dict[str, Family], frozenset[str]]:
    key = tuple(sys.path)
    hit = _CACHE.get("scan")
    if hit is not None and hit[0] == key:
        return hit[1], hit[2]
    builtin = _builtin_targets()
    targets = dict(builtin)
    for name, eps in sorted(entry_points_by_name(GROUP).items()):
        for ep in eps:
            if targets.get(name, ep.value) != ep.value:
                raise FamilyError(f"family '{name}' ({ep.value}) clashes with {targets[name]}")
            targets[name] = ep.value
    found = {name: _load(name, t) for name, t in targets.items()}
    owner: dict[str, str] = {}
    for fam in found.values():
        for part in (*fam.stages, *fam.tables):
            if part in owner:
                raise FamilyError(f"'{part}' of family '{fam.name}' is also '{owner[part]}''s")
            owner[part] = fam.name
    plugins = frozenset(n for n, t in targets.items() if builtin.get(n) != t)
    _CACHE["scan"] = (key, found, plugins)
    return found, plugins


def families() -> list[Family]:
    """Every registered family: the built-ins in their listed order, then plugins by name
    (scanned once per ``sys.path``)."""
    return list(_scan()[0].values())


def family(name: str) -> Family:
    found = _scan()[0]
    if name not in found:
        raise KeyError(f"unknown benchmark family '{name}' (known: {', '.join(found)})")
    return found[name]


def plugin_names() -> frozenset[str]:
    """The families registered only through entry points (their stages are placed by their
    inputs; the built-ins' order is trusted)."""
    return _scan()[1]


def stage_targets() -> dict[str, str]:
    """Every family's stages, family after family: stage name -> "module:Class"."""
    return {n: t for f in families() for n, t in f.stages.items()}


def table_targets() -> dict[str, str]:
    """The tables that families declare and no stage writes: table -> "module:SCHEMA"."""
    return {n: t for f in families() for n, t in f.tables.items()}


def annotation_projects() -> dict[str, AnnotationProject]:
    """Every family's Label Studio projects, by key."""
    return {k: p for f in families() for k, p in f.labelstudio.items()}
