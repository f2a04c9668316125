"""The XPlainVerse challenge (Explainable Deepfake Detection Challenge 2026, CodaBench): its
submission and reference formats and its leaderboard scores (``docs/xdd.md``)."""

from forenset.families import Family

FAMILY = Family(
    name="xdd",
    title="XDD challenge",
    cli="forenset.benchmarks.xdd.cli:app",
    predictions={".zip": "forenset.benchmarks.xdd.format:as_predictions"},
    store_exports={"xdd": "forenset.benchmarks.xdd.export:export_xdd"},
    store_commands=("xdd-import-gold",),
)
