"""The run store on a real S3-compatible server (moto on 127.0.0.1), across processes.

What a Dask worker or a deployment run on another host commits must be visible to the build
process at once, even after it has listed the run directory; a commit is one PUT; two builds
never hold one run directory; storage options come from config, secrets never do.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest

from forenset.store.run_store import RunLockedError, RunStore
from forenset.store.storage import StorageConfig, storage_options
from forenset.store.views import connect

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _table(ids: list[str]) -> pa.Table:
    return pa.table({"sample_id": ids, "status": ["ok"] * len(ids)})


def _python(code: str, env: dict | None = None, **kw) -> subprocess.Popen:
    """Another process, as a Dask worker or a deployment run on another host would be."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, "PYTHONPATH": ROOT, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def _run(code: str, env: dict | None = None) -> str:
    p = _python(code, env)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err[-2000:]
    return out


def test_commits_of_another_process_are_seen_after_a_listing(s3):
    """The stale-listing bug: the build lists the run (sweep of temporaries), another process
    then commits a shard and rewrites the manifest; footers, manifests and DuckDB views of
    the build's own store must all see the new state."""
    uri = f"s3://{s3.bucket}/run"
    store = RunStore(uri)
    a = store.write_shard("sources", "shard-0000", _table(["a", "b"]), fingerprint="f0")
    store.write_manifest("sources", [a])
    store.remove_temp_files()  # what a (resumed) build does first
    store.stages_present()
    assert store.manifest("sources") == [a]
    assert store.shard_info("sources", "shard-0001", {}) is None  # not there yet

    _run(
        f"""
        from forenset.store.run_store import RunStore
        import pyarrow as pa
        s = RunStore({uri!r})
        a = s.shard_info("sources", "shard-0000", {{}})
        b = s.write_shard("sources", "shard-0001",
                          pa.table({{"sample_id": ["c", "d", "e"], "status": ["ok"] * 3}}),
                          fingerprint="f1")
        s.write_manifest("sources", [a, b], {{"note": "x" * 500}})
        """
    )

    info = store.shard_info("sources", "shard-0001", {})
    assert info is not None and info.rows == 3 and info.fingerprint == "f1"
    assert [s.shard_id for s in store.manifest("sources")] == ["shard-0000", "shard-0001"]
    assert store.read_shard(info)["sample_id"].to_pylist() == ["c", "d", "e"]
    assert "sources" in store.stages_present()
    con = connect(store, ["sources"])
    ids = sorted(r[0] for r in con.sql("SELECT sample_id FROM sources").fetchall())
    assert ids == ["a", "b", "c", "d", "e"]


def test_a_commit_is_one_put_and_a_footer_one_get(s3):
    """No temporary, copy, delete, HEAD or per-directory round trip on the way."""
    store = RunStore(f"s3://{s3.bucket}/run")
    before = s3.requests()
    store.write_shard("diffs", "shard-0000", _table(["a"]), fingerprint="f", partition={"g": "x"})
    put = s3.request_lines()[before:]
    assert len(put) == 1 and '"PUT ' in put[0] and "_tmp" not in put[0], put

    before = s3.requests()
    info = store.shard_info("diffs", "shard-0000", {"g": "x"})
    table = store.read_shard(info)  # a small shard: the footer read brought all of it
    got = s3.request_lines()[before:]
    assert table.num_rows == 1
    assert len(got) == 1 and '"GET ' in got[0], got

    before = s3.requests()
    ref = store.put_blob(b"\x89PNG fake image bytes")
    again = store.put_blob(b"\x89PNG fake image bytes")  # already there: refused by the server
    assert ref == again
    puts = s3.request_lines()[before:]
    assert len(puts) == 2 and all('"PUT ' in ln for ln in puts), puts
    assert " 412 " in puts[1]  # If-None-Match: * honoured: the object was not rewritten


def test_two_processes_racing_for_the_lock_one_wins(s3):
    """Conditional create (If-None-Match: *): of two builds starting at the same instant on one
    s3:// run dir, exactly one holds it; the other is refused naming the holder."""
    uri = f"s3://{s3.bucket}/run"
    start = time.time() + 3
    code = f"""
        import time, sys
        from forenset.store.run_store import RunStore, RunLockedError
        s = RunStore({uri!r})
        time.sleep(max(0, {start} - time.time()))
        try:
            s.acquire_lock()
        except RunLockedError as e:
            print("REFUSED", e); sys.exit(0)
        print("HELD"); sys.stdout.flush()
        time.sleep(4)
        s.release_lock()
        """
    procs = [_python(code) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-1500:] for o in outs]
    stdout = sorted(o[0].strip() for o in outs)
    assert stdout[0].startswith("HELD") and stdout[1].startswith("REFUSED"), stdout
    msg = stdout[1].removeprefix("REFUSED ")
    holder = [p for p, o in zip(procs, outs, strict=True) if o[0].startswith("HELD")][0]
    assert f"process {holder.pid} on host {os.uname().nodename}" in msg
    assert "last heartbeat" in msg and msg.count(". ") == 0  # one sentence
    assert RunStore(uri).lock_holder() is None  # released


def test_object_store_lease_expires_and_is_taken_over(s3):
    """A holder that stops renewing (its host froze or lost the network: SIGSTOP here) is
    refused while its lease runs, and taken over once it expired; when it wakes up, it
    notices the lock is no longer its own and leaves it alone."""
    uri = f"s3://{s3.bucket}/run"
    env = {"FORENSET_STORAGE": StorageConfig(lock_lease_s=6).model_dump_json()}
    holder = _python(
        f"""
        import time
        from forenset.store.run_store import RunStore
        s = RunStore({uri!r})
        s.acquire_lock(); print("HELD", flush=True)
        time.sleep(60)
        """,
        env,
    )
    try:
        assert holder.stdout.readline().strip() == "HELD"
        store = RunStore(uri, StorageConfig(lock_lease_s=6))
        with pytest.raises(RunLockedError, match=f"process {holder.pid} on host"):
            store.acquire_lock()
        time.sleep(3)  # two heartbeats at lease/3: the lease is renewed, still refused
        with pytest.raises(RunLockedError):
            store.acquire_lock()
        os.kill(holder.pid, signal.SIGSTOP)
        # its own host still runs the pid: only the lease can free the run directory
        deadline = time.monotonic() + 30
        while True:
            try:
                store.acquire_lock()
                break
            except RunLockedError:
                assert time.monotonic() < deadline, "lease never expired"
                time.sleep(1)
        mine = store.lock_holder()
        assert mine["pid"] == os.getpid()
        os.kill(holder.pid, signal.SIGCONT)
        time.sleep(3)  # the woken holder's next heartbeat sees a foreign token and stops
        assert store.lock_holder()["token"] == mine["token"]
        store.release_lock()
        assert store.lock_holder() is None
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)


def test_storage_options_come_from_config_and_reach_every_filesystem(s3, monkeypatch):
    """With only the credentials in the environment, ``storage.endpoint`` is what finds the
    server: for the store, for DuckDB's views, and for a worker process that inherited it."""
    endpoint = os.environ.pop("AWS_ENDPOINT_URL")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    storage = StorageConfig(endpoint=endpoint, region="us-east-1")
    opts = storage_options("s3://b/run", storage)
    assert opts["endpoint_url"] == endpoint and opts["use_listings_cache"] is False
    uri = f"s3://{s3.bucket}/run"
    store = RunStore(uri, storage)
    a = store.write_shard("sources", "shard-0000", _table(["a"]), fingerprint="f")
    store.write_manifest("sources", [a])
    assert connect(store, ["sources"]).sql("SELECT count(*) FROM sources").fetchall()[0][0] == 1
    out = _run(
        f"""
        from forenset.store.run_store import RunStore
        print(RunStore({uri!r}).manifest("sources")[0].rows)
        """,
        {"FORENSET_STORAGE": storage.model_dump_json()},
    )
    assert out.strip() == "1"
    assert endpoint not in json.dumps(store.read_json("stages/sources/_manifest.json"))


def test_storage_section_refuses_secrets():
    from forenset.config import ConfigError, validate_config

    with pytest.raises(ConfigError, match="storage.secret would write a secret"):
        validate_config({"storage": {"endpoint": "http://x", "secret": "s3cr3t"}})
    cfg = validate_config({"storage": {"endpoint": "http://127.0.0.1:9000", "profile": "p"}})
    assert cfg.storage.profile == "p"
    assert "s3cr3t" not in json.dumps(cfg.resolved())


def test_storage_options_map_to_each_driver():
    """The config's fields as s3fs and gcsfs take them; local and memory runs take none."""
    st = StorageConfig(endpoint="http://127.0.0.1:9000", region="eu-west-1", profile="ci")
    assert storage_options("s3://b/run", st) == {
        "endpoint_url": "http://127.0.0.1:9000",
        "profile": "ci",
        "client_kwargs": {"region_name": "eu-west-1"},
        "config_kwargs": {"connect_timeout": 10},
        "use_listings_cache": False,
    }
    assert storage_options("gs://b/run", StorageConfig(anonymous=True)) == {
        "token": "anon",
        "use_listings_cache": False,
    }
    assert storage_options("s3://b/run", StorageConfig(anonymous=True))["anon"] is True
    assert storage_options("/tmp/run", st) == {}
    assert storage_options("memory://run", st) == {}


@pytest.mark.slow
def test_credentials_from_a_prefect_secret_block(s3, monkeypatch):
    """With no credentials in the environment, ``storage.credentials_block`` supplies them at
    run time; the block's name is all that the run directory's config holds."""
    from prefect.blocks.system import Secret
    from prefect.testing.utilities import prefect_test_harness

    key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()  # instances of earlier tests hold their credentials
    uri = f"s3://{s3.bucket}/run"
    with prefect_test_harness(server_startup_timeout=120):
        Secret(value={"key": key, "secret": secret}).save("forenset-s3-test", overwrite=True)
        with pytest.raises(Exception, match="(?i)credential"):
            RunStore(uri).write_json("probe.json", {})  # nothing in the environment
        store = RunStore(uri, StorageConfig(credentials_block="forenset-s3-test"))
        store.write_json("probe.json", {"ok": 1})
        assert store.read_json("probe.json") == {"ok": 1}
    assert secret not in StorageConfig(credentials_block="forenset-s3-test").model_dump_json()
