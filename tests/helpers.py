"""Read stage tables back for comparisons; run_local runs the DAG without Prefect."""

from __future__ import annotations

import pyarrow as pa

from forenset.flows.local import run_local
from forenset.schemas.common import VOLATILE
from forenset.stages import stage_class, stage_names
from forenset.store.run_store import RunStore

__all__ = ["run_local", "rows", "all_rows", "agreeing_evaluator"]


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
