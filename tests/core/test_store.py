import pyarrow as pa

from forenset.store.run_store import RunStore, fingerprint


def test_blobs_are_content_addressed(tmp_path):
    s = RunStore(str(tmp_path))
    a = s.put_blob(b"hello", "png")
    assert a == s.put_blob(b"hello", "png")
    assert a.startswith("blobs/2c/") and a.endswith(".png")
    assert s.get_blob(a) == b"hello"
    assert s.put_blob(b"other") != a


def test_shard_commit_is_atomic_and_footer_carries_metadata(tmp_path):
    s = RunStore(str(tmp_path))
    t = pa.table({"id": ["a", "b"], "status": ["ok", "error"]})
    info = s.write_shard(
        "x",
        "shard-0",
        t,
        fingerprint="fp1",
        partition={"generator": "g"},
        counts={"ok": 1},
        content_columns=["id", "status"],
    )
    assert info.path == "stages/x/generator=g/shard-0.parquet"
    assert not list(tmp_path.rglob("*.tmp-*"))
    back = s.shard_info("x", "shard-0", {"generator": "g"})
    assert back.fingerprint == "fp1" and back.counts == {"ok": 1} and back.rows == 2
    assert back.content_id == info.content_id
    assert s.read_shard(back).to_pylist() == t.to_pylist()
    assert s.shard_info("x", "missing", {}) is None


def test_content_id_ignores_non_content_columns(tmp_path):
    s = RunStore(str(tmp_path))
    a = s.write_shard(
        "x",
        "a",
        pa.table({"id": ["1"], "status": ["ok"], "elapsed_ms": [1.0]}),
        fingerprint="f",
        content_columns=["id", "status"],
    )
    b = s.write_shard(
        "x",
        "b",
        pa.table({"id": ["1"], "status": ["ok"], "elapsed_ms": [9.0]}),
        fingerprint="f",
        content_columns=["id", "status"],
    )
    c = s.write_shard(
        "x",
        "c",
        pa.table({"id": ["1"], "status": ["error"], "elapsed_ms": [9.0]}),
        fingerprint="f",
        content_columns=["id", "status"],
    )
    assert a.content_id == b.content_id != c.content_id


def test_fingerprint_depends_on_every_part():
    base = fingerprint("s", "1", {"a": 1}, ["x"])
    assert base == fingerprint("s", "1", {"a": 1}, ["x"])
    assert (
        len(
            {
                base,
                fingerprint("t", "1", {"a": 1}, ["x"]),
                fingerprint("s", "2", {"a": 1}, ["x"]),
                fingerprint("s", "1", {"a": 2}, ["x"]),
                fingerprint("s", "1", {"a": 1}, ["y"]),
            }
        )
        == 5
    )


def test_fsspec_memory_uri_works():
    s = RunStore("memory://forenset-test-run")
    ref = s.put_blob(b"abc")
    assert s.get_blob(ref) == b"abc"
    info = s.write_shard("x", "s0", pa.table({"id": ["1"], "status": ["ok"]}), fingerprint="f")
    assert s.shard_info("x", "s0", {}).fingerprint == "f"
    s.write_manifest("x", [info])
    assert s.manifest("x")[0].path == info.path


def test_lock_refuses_second_holder_and_takes_over_stale(tmp_path):
    import json
    import os

    import pytest

    from forenset.store.run_store import RunLockedError

    s = RunStore(str(tmp_path))
    (tmp_path / "build.lock").write_text(
        json.dumps({"pid": os.getppid(), "host": os.uname().nodename})
    )
    with pytest.raises(RunLockedError, match="being built"):
        s.acquire_lock()  # another live process holds it
    (tmp_path / "build.lock").unlink()
    s.acquire_lock()
    s.acquire_lock()  # re-entrant in the holding process
    s.release_lock()
    assert (tmp_path / "build.lock").exists()
    s.release_lock()
    assert not (tmp_path / "build.lock").exists()
    (tmp_path / "build.lock").write_text(
        json.dumps({"pid": 2**22 + 12345, "host": os.uname().nodename})
    )
    s.acquire_lock()  # dead pid: taken over
    s.release_lock()
    assert not (tmp_path / "build.lock").exists()


def test_killed_writes_leave_temporaries_only_in_tmp_and_resume_sweeps_them(tmp_path):
    """A build killed between a blob's write and its rename (the CI failure of stop 12) leaves
    its temporary in ``_tmp/``, never beside the blobs; the next build's sweep removes it and
    older-layout siblings in stages/ and exports/, and keeps every committed file."""
    import subprocess
    import sys

    crash = (
        "import os, sys\n"
        "from forenset.store.run_store import RunStore\n"
        "s = RunStore(sys.argv[1])\n"
        "s.fs.mv = lambda *a, **k: os._exit(9)  # die after the bytes are written\n"
        "s.put_blob(b'half-done image')\n"
    )
    p = subprocess.run([sys.executable, "-c", crash, str(tmp_path)], capture_output=True)
    assert p.returncode == 9, p.stderr
    left = [q for q in tmp_path.rglob("*") if ".tmp-" in q.name]
    assert len(left) == 1 and left[0].parent.name == "_tmp", left
    assert not (tmp_path / "blobs").exists() or not any((tmp_path / "blobs").rglob("*.tmp-*"))
    s = RunStore(str(tmp_path))
    kept = s.put_blob(b"committed image")
    info = s.write_shard("x", "s0", pa.table({"id": ["1"], "status": ["ok"]}), fingerprint="f")
    legacy = [tmp_path / "stages/x/s1.parquet.tmp-0badf00d", tmp_path / "exports/a.parquet.tmp-1"]
    for q in legacy:
        q.parent.mkdir(parents=True, exist_ok=True)
        q.write_bytes(b"partial")
    assert s.remove_temp_files() == 3
    assert not [q for q in tmp_path.rglob("*") if ".tmp-" in q.name]
    assert s.get_blob(kept) == b"committed image"
    assert s.shard_info("x", "s0", {}).fingerprint == info.fingerprint
    assert s.remove_temp_files() == 0
