"""Run directory layout, content-addressed blobs and atomically written Parquet shards.

Layout::

    <run>/config.yaml            resolved config (no secrets) + config_hash.txt
    <run>/blobs/ab/<sha256>.png  images, content addressed
    <run>/stages/<stage>/[<k>=<v>/]<shard>.parquet   one file per shard, hive partitioned
    <run>/stages/<stage>/_manifest.json              the shards of the current build (what views read)
    <run>/_tmp/<name>.tmp-<random>                   files being written, renamed into place when whole

A shard's Parquet footer carries its fingerprint, content id and row counts, so the file
itself is the commit record. On a POSIX filesystem it is written under a temporary name and
renamed into place; every temporary lives in ``_tmp/``, so a resumed build sweeps what a killed
one left by listing one folder, not by walking millions of blobs. On an object store a PUT is
already atomic (readers see the whole object or none), so a file is committed by one PUT: no
temporary, no server-side copy, no delete, no per-directory round trips.

Reads on an object store never depend on a directory listing: the store's filesystem keeps no
listing cache (``forenset.store.storage``), shards are found by their known paths (footers),
stage tables by their manifests, and small files are read by one ranged GET each.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import posixpath
import threading
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from forenset.store.lock import LOCK_NAME, LockLostError, RunLock, RunLockedError
from forenset.store.storage import StorageConfig, default_storage, open_fs

META_KEY = b"forenset"
TMP_DIR = "_tmp"  # temporaries of atomic writes (same volume as the run, so rename is atomic)


def temp_name(final: str) -> str:
    """A unique temporary name for ``final``'s contents, kept recognisable (``.tmp-``)."""
    return f"{posixpath.basename(final)}.tmp-{uuid.uuid4().hex[:8]}"


def write_atomic(fs: Any, root: str, final: str, data: bytes, *, fsync: bool = False) -> None:
    """Write ``data`` to ``final`` through a temporary in ``<root>/_tmp/`` and a rename.

    A failed write (ENOSPC, EROFS...) removes its temporary; a killed one leaves it in ``_tmp/``,
    where the next build sweeps it (``RunStore.remove_temp_files``). On an object store one PUT
    is atomic already: it is all that is done."""
    if not _is_local_fs(fs):
        fs.pipe_file(final, data)
        return
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


__all__ = ["LockLostError", "RunLockedError", "RunStore", "ShardInfo"]
FOOTER_TAIL = 256 * 1024  # bytes read from a shard's end: the footer, or the whole small shard
BLOB_CACHE_BYTES = 64 * 2**20  # blobs are immutable (content addressed): keep recent ones


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
    """A run directory. ``uri`` is a local path or any fsspec URI (``memory://``, ``s3://``...).

    ``storage``: how to reach it (endpoint, region, profile...); default: what this process
    inherited (``forenset.store.storage.use_storage``), else the environment's defaults."""

    def __init__(self, uri: str, storage: StorageConfig | None = None):
        self.uri = str(uri)
        self.storage = storage or default_storage()
        self.fs, root = open_fs(self.uri, self.storage)
        self.root = root.rstrip("/") if root not in ("/", "") else root
        self.is_local = _is_local_fs(self.fs)
        # object stores: recent blobs and whole small shards, so that the stages of one build
        # do not fetch them again (blobs never change; a shard is checked against its footer)
        self._blobs: dict[str, bytes] = {}  # insertion-ordered: oldest first
        self._blob_bytes = 0
        self._small: dict[str, bytes] = {}
        self._cache_lock = threading.Lock()
        if self.is_local:
            self.fs.makedirs(self.root, exist_ok=True)  # object stores have no directories

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
    def check_lock(self, fence: str | None = None) -> None:
        """Fencing before a commit (``forenset.store.lock``): when this process holds the run's
        lock, or ``fence`` names the holder's token (a shard task in another process), the lock
        must still be that holder's, else ``LockLostError`` (one sentence). Nothing to check for
        a write outside a build (no lock held, no fence)."""
        key = self.path(LOCK_NAME)
        held = _LOCKS.get(key)
        if held is not None:
            held[0].check(fence)
        elif fence:
            RunLock(
                self.fs, key, self.uri, lease_s=self.storage.lock_lease_s, posix=self.is_local
            ).check(fence)

    def lock_token(self) -> str | None:
        """The token of the lock this process holds on the run, else None (shard tasks carry it
        to other processes for ``check_lock``)."""
        held = _LOCKS.get(self.path(LOCK_NAME))
        return held[0].token if held else None

    def write_bytes_atomic(self, rel: str, data: bytes, *, fence: str | None = None) -> None:
        """Readers never see a partial file: a rename locally, one PUT on object stores.
        Fenced: a build that lost its lock commits nothing more (``check_lock``)."""
        self.check_lock(fence)
        if self.is_local:
            write_atomic(self.fs, self.root, self.path(rel), data, fsync=True)
        else:
            self.fs.pipe_file(self.path(rel), data)

    def read_bytes(self, rel: str) -> bytes:
        if not self.is_local:
            return self._get(self.path(rel))
        with self.fs.open(self.path(rel), "rb") as f:
            return f.read()

    def _get(self, path: str, start: int | None = 0) -> bytes:
        """One GET (s3fs asks for the size first when no range is given)."""
        return self.fs.cat_file(path, start=start)

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
        """Store bytes content-addressed; returns the relative path (the blob ref).

        Object stores: one conditional PUT (``If-None-Match: *`` where supported), no HEAD."""
        digest = hashlib.sha256(data).hexdigest()
        rel = posixpath.join("blobs", digest[:2], f"{digest}.{ext}")
        if self.is_local:
            if not self.exists(rel):
                self.write_bytes_atomic(rel, data)
        else:
            try:
                self.fs.pipe_file(self.path(rel), data, mode="create")
            except FileExistsError:
                pass
        self._remember_blob(rel, data)
        return rel

    def get_blob(self, ref: str) -> bytes:
        data = self._blobs.get(ref)
        if data is None:
            data = self.read_bytes(ref)
            self._remember_blob(ref, data)
        return data

    def _remember_blob(self, ref: str, data: bytes) -> None:
        """Blobs never change (content addressed), so a process keeps the recent ones: the
        stages of one build read each image several times."""
        if self.is_local or len(data) > BLOB_CACHE_BYTES // 8:
            return
        with self._cache_lock:
            if ref in self._blobs:
                return
            self._blobs[ref] = data
            self._blob_bytes += len(data)
            while self._blob_bytes > BLOB_CACHE_BYTES:
                old = next(iter(self._blobs))
                self._blob_bytes -= len(self._blobs.pop(old))

    def _remember_shard(self, rel: str, data: bytes) -> None:
        if self.is_local or len(data) >= FOOTER_TAIL:
            return
        with self._cache_lock:
            self._small.pop(rel, None)
            self._small[rel] = data
            while len(self._small) > 256:
                self._small.pop(next(iter(self._small)))

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
        fence: str | None = None,
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
        self.write_bytes_atomic(rel, buf.getvalue(), fence=fence)
        self._remember_shard(rel, buf.getvalue())
        return info

    def shard_info(self, stage: str, shard_id: str, partition: dict[str, str]) -> ShardInfo | None:
        """Footer metadata of a committed shard, or None when absent or unreadable.

        Object stores: one suffix-range GET of the file's tail, by its known path (no listing,
        no HEAD); a shard smaller than the tail is kept for ``read_shard``."""
        rel = shard_relpath(stage, shard_id, partition)
        try:
            if self.is_local:
                with self.fs.open(self.path(rel), "rb") as f:
                    md = pq.read_metadata(f).metadata or {}
            else:
                md = self._remote_footer(rel)
        except (FileNotFoundError, OSError, pa.ArrowInvalid, ValueError):
            return None
        raw = md.get(META_KEY)
        if raw is None:
            return None
        return ShardInfo(**json.loads(raw))

    def _remote_footer(self, rel: str) -> dict[bytes, bytes]:
        path = self.path(rel)
        tail = self._get(path, start=-FOOTER_TAIL)
        if len(tail) < 12 or tail[-4:] != b"PAR1":
            raise ValueError(f"{rel} is not a Parquet file")
        footer_len = int.from_bytes(tail[-8:-4], "little")
        if footer_len + 8 > len(tail):  # a footer larger than the tail: read it as a file
            with self.fs.open(path, "rb") as f:
                return pq.read_metadata(f).metadata or {}
        if len(tail) < FOOTER_TAIL:  # the whole file: read_shard will not fetch it again
            self._remember_shard(rel, tail)
            return pq.read_metadata(pa.BufferReader(tail)).metadata or {}
        return pq.read_metadata(pa.BufferReader(b"PAR1" + tail[-(footer_len + 8) :])).metadata or {}

    def read_shard(self, info: ShardInfo, columns: list[str] | None = None) -> pa.Table:
        if self.is_local:
            with self.fs.open(self.path(info.path), "rb") as f:
                # ParquetFile, not read_table: read_table goes through pyarrow.dataset, which
                # imports pandas (~0.6 s) — planning reads shards on every build, no-op reruns too
                t = pq.ParquetFile(f).read(columns=columns)
            return t.replace_schema_metadata(None)
        pf = pq.ParquetFile(pa.BufferReader(self.shard_bytes([info])[0]))
        return pf.read(columns=columns).replace_schema_metadata(None)

    def shard_bytes(self, infos: list[ShardInfo]) -> list[bytes]:
        """Object stores: the files of committed shards, from this process's copies where their
        footers match, the others fetched by concurrent GETs (one each)."""
        out: list[bytes | None] = []
        for info in infos:
            data = self._small.get(info.path)
            if data is not None and not _same_commit(pq.ParquetFile(pa.BufferReader(data)), info):
                data = None  # rewritten since this process saw it (another build's shard)
            out.append(data)
        missing = [i.path for i, d in zip(infos, out, strict=True) if d is None]
        if missing:
            got = self.fs.cat([self.path(p) for p in missing], on_error="raise")
            strip = self.fs._strip_protocol
            by_rel = {
                p: got[self.path(p)] if self.path(p) in got else got[strip(self.path(p))]
                for p in missing
            }
            for p, data in by_rel.items():
                self._remember_shard(p, data)
            out = [d if d is not None else by_rel[i.path] for i, d in zip(infos, out, strict=True)]
        return out  # type: ignore[return-value]

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
        """Stages with a manifest (a fresh listing: the store's filesystem caches none)."""
        base = self.path("stages")
        try:
            entries = self.fs.ls(base, detail=False)
        except FileNotFoundError:
            return []
        out = []
        for p in entries:
            name = posixpath.basename(p.rstrip("/"))
            if self.fs.exists(posixpath.join(p, "_manifest.json")):
                out.append(name)
        return sorted(out)

    # -- lock ----------------------------------------------------------------------
    def acquire_lock(self) -> None:
        """One build per run directory, across processes and hosts (``forenset.store.lock``):
        a lease renewed by a heartbeat; a lock of a dead process or with an expired lease is
        taken over. Raises ``RunLockedError`` (one sentence naming the holder) otherwise.

        Re-entrant within a process (the CLI takes it before starting the flow, which takes it
        again so that deployment runs are protected too).
        """
        key = self.path(LOCK_NAME)
        if key in _LOCKS:
            lock, depth = _LOCKS[key]
            _LOCKS[key] = (lock, depth + 1)
            return
        lock = RunLock(
            self.fs, key, self.uri, lease_s=self.storage.lock_lease_s, posix=self.is_local
        )
        lock.acquire()
        _LOCKS[key] = (lock, 1)

    def lock_holder(self) -> dict[str, Any] | None:
        """The lock's document (host, pid, heartbeat...), None when no build holds it."""
        return RunLock(
            self.fs,
            self.path(LOCK_NAME),
            self.uri,
            lease_s=self.storage.lock_lease_s,
            posix=self.is_local,
        ).read()

    def remove_temp_files(self) -> int:
        """Delete temporaries left by a killed build (call only while holding the lock).

        All of them are in ``_tmp/``; locally ``stages/`` is also swept for the sibling
        temporaries that runs written before ``_tmp/`` existed may hold (a few thousand shard
        files at most), and ``exports/`` for a killed export's partial file. Object stores
        commit by one PUT and leave none, but ``_tmp/`` of runs written by older versions is
        swept (one listing)."""
        tmps: list[str] = []
        sweep = [(self.path(TMP_DIR), False)]
        if self.is_local:
            sweep += [(self.path("stages"), True), (self.path("exports"), True)]
        for base, deep in sweep:
            try:
                found = self.fs.find(base) if deep else self.fs.ls(base, detail=False)
            except FileNotFoundError:
                continue
            tmps += [p for p in found if ".tmp-" in posixpath.basename(p)]
        if self.is_local:  # a lock heartbeat's or takeover's file, left by a SIGKILL
            held = _LOCKS.get(self.path(LOCK_NAME))
            mine = held[0].token[:8] if held else None
            leftovers = self.fs.glob(self.path(LOCK_NAME + ".*"))
            tmps += [p for p in leftovers if not (mine and p.endswith(mine))]
        for p in tmps:
            _remove_quietly(self.fs, p)
        return len(tmps)

    def release_lock(self, *, all_levels: bool = False) -> None:
        """Undo one ``acquire_lock`` (the lock is re-entrant); ``all_levels``: drop this
        process's hold entirely, for a process about to quit without unwinding."""
        key = self.path(LOCK_NAME)
        if key not in _LOCKS:
            return
        lock, depth = _LOCKS[key]
        if depth > 1 and not all_levels:
            _LOCKS[key] = (lock, depth - 1)
            return
        del _LOCKS[key]
        try:
            lock.release()
        except (FileNotFoundError, OSError, ValueError):
            pass


_LOCKS: dict[str, tuple[RunLock, int]] = {}  # held locks of this process: (lock, depth)


def _same_commit(pf: pq.ParquetFile, info: ShardInfo) -> bool:
    raw = (pf.metadata.metadata or {}).get(META_KEY)
    if raw is None:
        return False
    doc = json.loads(raw)
    return doc.get("fingerprint") == info.fingerprint and doc.get("content_id") == info.content_id


def _is_local_fs(fs: Any) -> bool:
    """A POSIX filesystem (local disk, NFS, Lustre... and subclasses of fsspec's local one)."""
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def _remove_quietly(fs: Any, path: str) -> None:
    try:
        fs.rm(path)
    except (FileNotFoundError, OSError):
        pass


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
