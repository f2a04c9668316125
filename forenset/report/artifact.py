"""A Prefect markdown artifact summarising a build (stage table + export counts)."""

from __future__ import annotations

import logging
from typing import Any

COLUMNS = ("planned", "run", "skipped", "failed", "rows", "ok", "error", "kept", "discarded")
log = logging.getLogger(__name__)


def _as_dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else dict(vars(v))


def summary_markdown(stats: dict[str, Any], export: dict[str, Any]) -> str:
    """The artifact's text: one row per stage, then what the export wrote."""
    lines = [
        "# forenset build",
        "",
        "| stage | " + " | ".join(COLUMNS) + " | seconds |",
        "|---|" + "---:|" * (len(COLUMNS) + 1),
    ]
    failures: list[str] = []
    for name, st in stats.items():
        d = _as_dict(st)
        cells = [str(d.get(c, "")) for c in COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {float(d.get('seconds', 0)):.1f} |")
        failures += [str(f) for f in d.get("failures", [])]
    lines += ["", "## Export", ""]
    if export:
        lines.append(
            f"- path: `{export.get('path', '')}`"
            + (" (unchanged)" if export.get("skipped") else "")
        )
        for split, n in (export.get("counts") or {}).items():
            lines.append(f"- {split}: {n} samples")
        for fmt, res in (export.get("formats") or {}).items():
            lines.append(f"- {fmt}: `{res.get('path', '')}` {res.get('counts', '')}")
    else:
        lines.append("- no export")
    if failures:
        lines += ["", f"## Failed shards ({len(failures)})", ""]
        lines += [f"- {f}" for f in failures[:20]]
    return "\n".join(lines) + "\n"


def create_summary_artifact(stats: dict[str, Any], export: dict[str, Any]) -> None:
    """Publish the summary as a markdown artifact; a no-op outside a Prefect flow or task run.

    Never raises: a reporting problem must not fail a finished build.
    """
    try:
        from prefect.context import FlowRunContext, TaskRunContext

        if FlowRunContext.get() is None and TaskRunContext.get() is None:
            return
        from prefect.artifacts import create_markdown_artifact

        create_markdown_artifact(
            markdown=summary_markdown(stats, export),
            key="forenset-build-summary",
            description="Shards and rows per stage, and the export of this build.",
            _sync=True,  # type: ignore[call-arg]  # Prefect's sync_compatible switch, not in the signature: the build runs in a worker thread of an async flow, no loop here
        )
    except Exception as e:  # noqa: BLE001 - the build result stands even if the artifact fails
        log.warning("could not create the build summary artifact: %s", e)
