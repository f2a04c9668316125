"""The importers by benchmark name: one module per release layout, each with ``read(root,
annotations, limit)`` (records, error rows included) and ``files(root, annotations)`` (what it
reads, for the fingerprint)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

from forenset.benchmarks.public.formats import records as rec

IMPORTERS = {
    "fakeclue": "forenset.benchmarks.public.formats.fakeclue",
    "loki": "forenset.benchmarks.public.formats.loki",
    "sofake_ood": "forenset.benchmarks.public.formats.sofake",
    "aigi_holmes": "forenset.benchmarks.public.formats.aigi_holmes",
}


def module(name: str) -> ModuleType:
    return importlib.import_module(IMPORTERS[name])


def import_records(
    name: str,
    root: str,
    annotations: str | None = None,
    limit: int | None = None,
    tasks: Sequence[str] | None = None,
) -> Iterator[dict[str, Any]]:
    """The benchmark's records (error rows included) of ``tasks`` (None: all); ``limit`` caps
    the records read per annotation file, in file order."""
    m = module(name)
    got = (
        m.read(root, annotations, limit, tasks)
        if name == "loki"
        else m.read(root, annotations, limit)
    )
    for r in got:
        if tasks is None or r["task"] in tasks:
            yield r


def digest(
    name: str, root: str, annotations: str | None, tasks: Sequence[str] | None = None
) -> str:
    m = module(name)
    try:
        found = m.files(root, annotations, tasks) if name == "loki" else m.files(root, annotations)
    except (OSError, ValueError) as e:  # the import says so, in one sentence, when it runs
        return f"unreadable: {rec.reason(e)}"
    return rec.files_digest(found, root)
