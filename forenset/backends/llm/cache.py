"""Response cache in the run store: never pay twice for the same call.

Key = sha256 over (backend, model, task, system, user, image sha256s, params, schema).
Files live at ``<root>/cache/llm/<ab>/<key>.json`` on any fsspec filesystem, written to a
temporary name and renamed, so a crash never leaves a torn entry.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import fsspec

from forenset.backends.llm.jsonout import json_schema_for
from forenset.backends.llm.types import ChatRequest, ModelSpec
from forenset.store.run_store import write_atomic


def cache_key(spec: ModelSpec, req: ChatRequest) -> str:
    """Content hash of everything that changes the model's answer (not the item id)."""
    schema = json_schema_for(req.response_model) if req.response_model else None
    payload = {
        "backend": spec.backend,
        "model": spec.model,
        "params": spec.params,
        "task": req.task,
        "system": req.system,
        "user": req.user,
        "images": [hashlib.sha256(b).hexdigest() for b in req.images],
        "temperature": req.temperature,
        "max_tokens": req.max_tokens,
        "seed": req.seed,
        "schema": schema,
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


class ResponseCache:
    """Raw replies (text + token counts) by cache key; parsing is redone on read."""

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str) -> None:
        self.fs = fs
        self.root = root.rstrip("/")

    def path(self, key: str) -> str:
        return f"{self.root}/cache/llm/{key[:2]}/{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self.path(key)
        try:
            with self.fs.open(path, "rb") as f:
                return json.loads(f.read())
        except FileNotFoundError:
            return None
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None  # a damaged entry is a miss, the next put repairs it

    def put(self, key: str, entry: dict[str, Any]) -> None:
        from forenset.redact import redact

        # a reply that echoes a secret is cached without it (forenset.redact)
        data = redact(json.dumps({"key": key, **entry}, sort_keys=True)).encode("utf-8")
        write_atomic(self.fs, self.root, self.path(key), data)
