"""Run directory layout, content-addressed blobs and atomically written Parquet shards.

Layout::

    <run>/config.yaml            resolved config (no secrets) + config_hash.txt
    <run>/blobs/ab/<sha256>.png  images, content addressed
    <run>/stages/<stage>/[<k>=<v>/]<shard>.parquet   one file per shard, hive partitioned
    <run>/stages/<stage>/_manifest.json              the shards of the current build (what views read)
    <run>/_tmp/<name>.tmp-<random>                   files being written, renamed into place when whole

A shard's Parquet footer carries its fingerprint, content id and row counts, so the file
itself is the commit record: it is written under a temporary name and renamed into place.
Every temporary lives in ``_tmp/``, so a resumed build sweeps what a killed one left by
listing one folder, not by walking millions of blobs.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import posixpath
import socket
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from forenset.errors import ForensetError

META_KEY = b"forenset"
TMP_DIR = "_tmp"  # temporaries of atomic writes (same volume as the run, so rename is atomic)


def temp_name(final: str) -> str:
    """A unique temporary name for ``final``'s contents, kept recognisable (``.tmp-``)."""
    return f"{posixpath.basename(final)}.tmp-{uuid.uuid4().hex[:8]}"


def write_atomic(fs: Any, root: str, final: str, data: bytes, *, fsync: bool = False) -> None:
    """Write ``data`` to ``final`` through a temporary in ``<root>/_tmp/`` and a rename.

    A failed write (ENOSPC, EROFS...) removes its temporary; a killed one leaves it in ``_tmp/``,
    where the next build sweeps it (``RunStore.remove_temp_files``)."""
    fs.makedirs(posixpath.dirname(final), exist_ok=True)
    fs.makedirs(posixpath.join(root, TMP_DIR), exist_ok=True)
    tmp = posixpath.join(root, TMP_DIR, temp_name(final))
    try:
        with fs.open(tmp, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        fs.mv(tmp, final)
    except BaseException:
        _remove_quietly(fs, tmp)
        raise


class RunLockedError(ForensetError, RuntimeError):
    """Another build holds the run directory."""


@dataclass
class ShardInfo:
    """What the footer of a committed shard says about it."""

    stage: str
    shard_id: str
    path: str  # relative to the run root
    fingerprint: str
    content_id: str
    partition: dict[str, str] = field(default_factory=dict)
    rows: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)  # upstream shard key -> content id

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def shard_relpath(stage: str, shard_id: str, partition: dict[str, str]) -> str:
    parts = ["stages", stage] + [f"{k}={v}" for k, v in partition.items()] + [f"{shard_id}.parquet"]
    return posixpath.join(*parts)


class RunStore:
    """A run directory. ``uri`` is a local path or any fsspec URI (``memory://``, ``s3://``...)."""

    def __init__(self, uri: str):
        self.uri = str(uri)
        self.fs, root = fsspec.core.url_to_fs(self.uri)
        self.root = root.rstrip("/") if root not in ("/", "") else root
        self.is_local = self.fs.protocol in ("file", ("file", "local")) or "file" in (
            self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        )
        self.fs.makedirs(self.root, exist_ok=True)

    # -- paths ---------------------------------------------------------------
    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def local_path(self, rel: str) -> str:
        """A path DuckDB can read: local paths as is, remote ones as a URI."""
        p = self.path(rel)
        if self.is_local:
            return p
        proto = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return f"{proto}://{p}"

    # -- small files -----------------------------------------------------------
    def write_bytes_atomic(self, rel: str, data: bytes) -> None:
        """Write to a temporary, then rename: readers never see a partial file."""
        write_atomic(self.fs, self.root, self.path(rel), data, fsync=self.is_local)

    def read_bytes(self, rel: str) -> bytes:
        with self.fs.open(self.path(rel), "rb") as f:
            return f.read()

    def exists(self, rel: str) -> bool:
        return self.fs.exists(self.path(rel))

    def write_json(self, rel: str, obj: Any) -> None:
        self.write_bytes_atomic(
            rel, json.dumps(obj, indent=1, sort_keys=True, default=str).encode()
        )

    def read_json(self, rel: str, default: Any = None) -> Any:
        try:
            return json.loads(self.read_bytes(rel))
        except FileNotFoundError:
            return default

    # -- blobs -------------------------------------------------------------------
    def put_blob(self, data: bytes, ext: str = "png") -> str:
        """Store bytes content-addressed; returns the relative path (the blob ref)."""
        digest = hashlib.sha256(data).hexdigest()
        rel = posixpath.join("blobs", digest[:2], f"{digest}.{ext}")
        if not self.exists(rel):
            self.write_bytes_atomic(rel, data)
        return rel

    def get_blob(self, ref: str) -> bytes:
        return self.read_bytes(ref)

    # -- shards ------------------------------------------------------------------
    def write_shard(
        self,
        stage: str,
        shard_id: str,
        table: pa.Table,
        *,
        fingerprint: str,
        partition: dict[str, str] | None = None,
        counts: dict[str, int] | None = None,
        inputs: dict[str, str] | None = None,
        content_columns: Iterable[str] = (),
    ) -> ShardInfo:
        partition = dict(partition or {})
        rel = shard_relpath(stage, shard_id, partition)
        content_id = table_content_id(table, content_columns)
        info = ShardInfo(
            stage=stage,
            shard_id=shard_id,
            path=rel,
            fingerprint=fingerprint,
            content_id=content_id,
            partition=partition,
            rows=table.num_rows,
            counts=dict(counts or {}),
            inputs=dict(inputs or {}),
        )
        meta = dict(table.schema.metadata or {})
        meta[META_KEY] = json.dumps(info.to_json(), sort_keys=True).encode()
        table = table.replace_schema_metadata(meta)
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd", row_group_size=10_000)
        self.write_bytes_atomic(rel, buf.getvalue())
        return info

    def shard_info(self, stage: str, shard_id: str, partition: dict[str, str]) -> ShardInfo | None:
        """Footer metadata of a committed shard, or None when absent or unreadable."""
        rel = shard_relpath(stage, shard_id, partition)
        try:
            with self.fs.open(self.path(rel), "rb") as f:
                md = pq.read_metadata(f).metadata or {}
        except (FileNotFoundError, OSError, pa.ArrowInvalid):
            return None
        raw = md.get(META_KEY)
        if raw is None:
            return None
        return ShardInfo(**json.loads(raw))

    def read_shard(self, info: ShardInfo, columns: list[str] | None = None) -> pa.Table:
        with self.fs.open(self.path(info.path), "rb") as f:
            # ParquetFile, not read_table: read_table goes through pyarrow.dataset, which
            # imports pandas (~0.6 s) — planning reads shards on every build, no-op reruns too
            t = pq.ParquetFile(f).read(columns=columns)
        return t.replace_schema_metadata(None)

    # -- manifests -----------------------------------------------------------------
    def manifest_path(self, stage: str) -> str:
        return posixpath.join("stages", stage, "_manifest.json")

    def write_manifest(
        self, stage: str, shards: list[ShardInfo], extra: dict | None = None
    ) -> None:
        doc = {"stage": stage, "shards": [s.to_json() for s in shards], **(extra or {})}
        self.write_json(self.manifest_path(stage), doc)

    def manifest(self, stage: str) -> list[ShardInfo]:
        doc = self.read_json(self.manifest_path(stage), default=None)
        if not doc:
            return []
        return [ShardInfo(**s) for s in doc["shards"]]

    def manifest_schema(self, stage: str):
        """The stage's output schema as its last build recorded it (``schema`` in the manifest,
        Arrow IPC in base64), or None. Lets readers build typed empty views without importing
        the stage's code."""
        import base64

        import pyarrow as pa

        doc = self.read_json(self.manifest_path(stage), default=None)
        if not doc or "schema" not in doc:
            return None
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(doc["schema"])))

    def stages_present(self) -> list[str]:
        base = self.path("stages")
        if not self.fs.exists(base):
            return []
        out = []
        for p in self.fs.ls(base, detail=False):
            name = posixpath.basename(p.rstrip("/"))
            if self.fs.exists(posixpath.join(p, "_manifest.json")):
                out.append(name)
        return sorted(out)

    # -- lock ----------------------------------------------------------------------
    def acquire_lock(self) -> None:
        """One build per run directory. A lock whose process is gone is taken over.

        Re-entrant within a process (the CLI takes it before starting the flow, which takes it
        again so that deployment runs are protected too).
        """
        rel = "build.lock"
        me = {"pid": os.getpid(), "host": socket.gethostname()}
        key = self.path(rel)
        if _LOCK_DEPTH.get(key, 0) > 0:
            _LOCK_DEPTH[key] += 1
            return
        if self.is_local:
            path = self.path(rel)
            for _ in range(2):
                try:
                    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                except FileExistsError:
                    try:
                        held = json.loads(open(path).read() or "{}")
                    except (OSError, ValueError):
                        held = {}
                    if held.get("host") == me["host"] and not _pid_alive(int(held.get("pid", 0))):
                        os.unlink(path)  # stale: its process died (e.g. SIGKILL)
                        continue
                    raise RunLockedError(
                        f"Run directory {self.uri} is being built by process {held.get('pid')} "
                        f"on {held.get('host')}; wait for it or remove {path} if it is gone."
                    ) from None
                with os.fdopen(fd, "w") as f:
                    json.dump(me, f)
                _LOCK_DEPTH[key] = 1
                return
        else:
            self.write_json(rel, me)  # object stores: advisory only
            _LOCK_DEPTH[key] = 1

    def remove_temp_files(self) -> int:
        """Delete temporaries left by a killed build (call only while holding the lock).

        All of them are in ``_tmp/``; ``stages/`` is also swept for the sibling temporaries that
        runs written before ``_tmp/`` existed may hold (a few thousand shard files at most), and
        ``exports/`` for a killed export's partial file."""
        tmps: list[str] = []
        sweep = (
            (self.path(TMP_DIR), False),
            (self.path("stages"), True),
            (self.path("exports"), True),
        )
        for base, deep in sweep:
            if not self.fs.exists(base):
                continue
            found = self.fs.find(base) if deep else self.fs.ls(base, detail=False)
            tmps += [p for p in found if ".tmp-" in posixpath.basename(p)]
        for p in tmps:
            _remove_quietly(self.fs, p)
        return len(tmps)

    def release_lock(self, *, all_levels: bool = False) -> None:
        """Undo one ``acquire_lock`` (the lock is re-entrant); ``all_levels``: drop this
        process's hold entirely, for a process about to quit without unwinding."""
        key = self.path("build.lock")
        depth = _LOCK_DEPTH.get(key, 0)
        if depth > 1 and not all_levels:
            _LOCK_DEPTH[key] = depth - 1
            return
        _LOCK_DEPTH.pop(key, None)
        try:
            held = self.read_json("build.lock", default={}) or {}
            if held.get("pid") == os.getpid():
                self.fs.rm(self.path("build.lock"))
        except (FileNotFoundError, ValueError):
            pass


_LOCK_DEPTH: dict[str, int] = {}


def _remove_quietly(fs: Any, path: str) -> None:
    try:
        fs.rm(path)
    except (FileNotFoundError, OSError):
        pass


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie counts as dead
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return True


def table_content_id(table: pa.Table, columns: Iterable[str]) -> str:
    """Hash of the columns that define a shard's content (ids, status), not timings."""
    h = hashlib.blake2b(digest_size=12)
    cols = [c for c in columns if c in table.column_names] or table.column_names
    for c in cols:
        h.update(c.encode())
        h.update(json.dumps(table.column(c).to_pylist(), default=str).encode())
    return h.hexdigest()


def fingerprint(stage: str, version: str, config: Any, inputs: list[str]) -> str:
    """hash(stage name, code version, resolved stage config, input shard fingerprints)."""
    doc = json.dumps(
        {"stage": stage, "version": version, "config": config, "inputs": sorted(inputs)},
        sort_keys=True,
        default=str,
    )
    return hashlib.blake2b(doc.encode(), digest_size=12).hexdigest()
