"""The metrics of each benchmark family, in display order: the lines of its ``Family.metrics``.

A line maps the metric's name to ``"module:attribute"`` of its scorer (imported on first use, so
listing names loads no model code). Adding a metric = its scorer module + one line in its
family's registration (CONTRIBUTING, "Adding a metric"); :func:`register` adds one at run time
(a plugin, a test).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from functools import cache

from forenset.benchmarks.common.scoring.protocol import GroupStatistic, Metric, Scorer
from forenset.errors import ForensetError
from forenset.families import families as registered_families


class _FamilyMetrics(MutableMapping[str, dict[str, str]]):
    """Each family's metric lines, read from its ``Family.metrics`` (``forenset.families``) on
    every lookup, so an installed family's metrics appear without a line here; an item set
    here overrides a family's list in process (a test, a recipe being tried)."""

    def __init__(self) -> None:
        self._set: dict[str, dict[str, str]] = {}

    def _all(self) -> dict[str, dict[str, str]]:
        got = {f.name: dict(f.metrics) for f in registered_families() if f.metrics}
        return {**got, **self._set}

    def __getitem__(self, family: str) -> dict[str, str]:
        return self._all()[family]

    def __setitem__(self, family: str, metrics: dict[str, str]) -> None:
        self._set[family] = metrics

    def __delitem__(self, family: str) -> None:
        del self._set[family]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


BUILTIN = _FamilyMetrics()
_REGISTERED: dict[str, dict[str, Metric]] = {}


class UnknownMetric(ForensetError, KeyError):
    """A metric name that no family lists."""


@cache
def _load(target: str) -> Metric:
    module, _, attr = target.partition(":")
    scorer: Metric = getattr(importlib.import_module(module), attr)
    return scorer


def register(family: str, scorer: Metric) -> Metric:
    """Add ``scorer`` to ``family`` after its built-ins (replacing one of the same name)."""
    if not isinstance(scorer, Scorer | GroupStatistic):
        raise TypeError(f"{scorer!r} implements neither the Scorer nor the GroupStatistic protocol")
    _REGISTERED.setdefault(family, {})[scorer.name] = scorer
    return scorer


def unregister(family: str, name: str) -> None:
    _REGISTERED.get(family, {}).pop(name, None)


def families() -> list[str]:
    return sorted(set(BUILTIN) | set(_REGISTERED))


def metric_names(family: str) -> list[str]:
    return list(dict.fromkeys([*BUILTIN.get(family, {}), *_REGISTERED.get(family, {})]))


def scorer(family: str, name: str) -> Metric:
    if name in _REGISTERED.get(family, {}):
        return _REGISTERED[family][name]
    target = BUILTIN.get(family, {}).get(name)
    if target is None:
        raise UnknownMetric(f"{family} has no metric {name!r}; known: {metric_names(family)}")
    got = _load(target)
    if getattr(got, "name", None) != name:
        raise TypeError(f"{target} is named {getattr(got, 'name', None)!r}, registered as {name!r}")
    return got


def scorers(family: str) -> tuple[Metric, ...]:
    """Every metric of ``family`` in display order (built-ins first)."""
    return tuple(scorer(family, n) for n in metric_names(family))
