"""The names of the export formats and Label Studio projects, ours and the families': read by
the CLI's help text, so this module imports nothing heavier than the families' scan."""

from __future__ import annotations

from forenset.families import annotation_projects, families

# "parquet" is the build's plain per-split Parquet (forenset/exports/dataset.py); the rest are
# ours, and each benchmark family adds its own (``Family.exports``: ``formats()``).
CORE_FORMATS: tuple[str, ...] = ("hf", "sft", "labelstudio")


def formats() -> tuple[str, ...]:
    """The sample formats of ``forenset export`` and ``export.formats``: ours, then the
    families' (``Family.exports``)."""
    return (*CORE_FORMATS, *(n for f in families() for n in f.exports))


# Label Studio projects (``labelstudio-setup``): the triage + region pair of the built dataset
# keeps the key it has always had (state files and ``--projects`` name it); the families add
# theirs (``Family.labelstudio``).
CORE_PROJECT = "safeimg"


def project_names() -> tuple[str, ...]:
    return (CORE_PROJECT, *annotation_projects())


def store_formats() -> tuple[str, ...]:
    """The formats that read the run's tables themselves (``Family.store_exports``)."""
    return tuple(n for f in families() for n in f.store_exports)
