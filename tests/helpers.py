"""Read stage tables back for comparisons; run_local runs the DAG without Prefect."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

from forenset.flows.local import run_local
from forenset.schemas.common import VOLATILE
from forenset.stages import stage_class, stage_names
from forenset.store.run_store import RunStore

__all__ = ["run_local", "rows", "all_rows", "agreeing_evaluator", "dump_dom", "needs_chromium"]


def rows(store: RunStore, stage: str) -> list[dict]:
    """All rows of a stage's current shards, minus volatile columns, sorted by key."""
    key = stage_class(stage).key
    out = []
    for info in store.manifest(stage):
        t: pa.Table = store.read_shard(info)
        out.extend({k: v for k, v in r.items() if k not in VOLATILE} for r in t.to_pylist())
    return sorted(out, key=lambda r: str(r[key]))


def all_rows(store: RunStore) -> dict[str, list[dict]]:
    return {name: rows(store, name) for name in stage_names()}


def agreeing_evaluator(body: dict) -> dict:
    """A fake-server reply for the EntityScore/EvidenceScore evaluator: one entity with one
    claim in every text, and every one of them supported."""
    from forenset.testing.fake_openai import request_text

    if "convert one free-form explanation" in " ".join(request_text(body).split()):
        return {
            "diagnostic_entities": [{"entity_id": "E1", "name": "hand"}],
            "evidence_claims": [{"claim_id": "C1", "entity_id": "E1", "claim": "blurry"}],
        }
    return {
        "entities": [{"entity_id": "E1", "supported": True}],
        "claims": [{"claim_id": "C1", "supported": True}],
    }


CHROMIUM = "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists(),
    reason="headless Chromium (/usr/bin/chromium, Debian package 'chromium') is not installed",
)


def dump_dom(html_text: str, script: str, tmp_path: Path, width: int | None = None,
             timeout: int = 120) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """The page ``html_text`` with ``script`` added before ``</body>``, rendered by headless
    Chromium (its own profile under ``tmp_path``); the DOM after the script ran is stdout."""
    probe = tmp_path / f"probe-{width or 'default'}.html"
    probe.write_text(html_text.replace("</body>", script + "</body>"))
    size = [f"--window-size={width},2000"] if width else []
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'chromium-profile'}", *size,
         "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
