"""The run store: a run directory (local path or fsspec URI) holding blobs and stage tables."""

from forenset.store.run_store import RunLockedError, RunStore, ShardInfo

__all__ = ["RunStore", "ShardInfo", "RunLockedError"]
