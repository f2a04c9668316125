"""Batch-job ledger in the run store: a restart polls the batch it already paid for.

``<root>/ledger/batches.jsonl`` holds one JSON event per line (submitted / status /
collected). Object stores cannot append, so each write rewrites the file to a temporary
name and renames it; a process-wide lock serialises writers of one process.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import fsspec

from forenset.store.run_store import write_atomic

_LOCK = threading.Lock()


class BatchLedger:
    def __init__(self, fs: fsspec.AbstractFileSystem, root: str) -> None:
        self.fs = fs
        self.root = root.rstrip("/")
        self.path = f"{self.root}/ledger/batches.jsonl"

    def events(self) -> list[dict[str, Any]]:
        try:
            with self.fs.open(self.path, "rb") as f:
                lines = f.read().decode("utf-8").splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(x) for x in lines if x.strip()]

    def append(self, event: dict[str, Any]) -> None:
        with _LOCK:
            lines = [json.dumps(e, sort_keys=True) for e in self.events()]
            lines.append(json.dumps({"ts": time.time(), **event}, sort_keys=True))
            write_atomic(self.fs, self.root, self.path, ("\n".join(lines) + "\n").encode("utf-8"))

    def batches_for(self, group: str) -> list[dict[str, Any]]:
        """Submitted batches of a group, oldest first, each with its latest status."""
        out: dict[str, dict[str, Any]] = {}
        for e in self.events():
            if e.get("group") != group:
                continue
            if e["event"] == "submitted":
                out[e["batch_id"]] = dict(e)
            elif e["batch_id"] in out:
                out[e["batch_id"]]["status"] = e.get("status", e["event"])
                if e["event"] == "collected":
                    out[e["batch_id"]]["collected"] = True
        return list(out.values())
