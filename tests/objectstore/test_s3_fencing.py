"""Issue 40 on a real S3 endpoint (moto): fencing, and storage settings from a flag."""

from __future__ import annotations

import pytest

from forenset.store.run_store import RunStore
from forenset.store.storage import StorageConfig, StorageError
from tests.reliability.test_rel_storage import _cli, _fencing


def test_fencing_on_s3(s3):
    _fencing(RunStore(f"s3://{s3.bucket}/run", StorageConfig(lock_lease_s=5)))


def test_status_takes_the_endpoint_from_the_flag(s3, monkeypatch):
    """With AWS_ENDPOINT_URL unset, --endpoint-url alone reaches the server."""
    ep = s3.env()["AWS_ENDPOINT_URL"]
    store = RunStore(f"s3://{s3.bucket}/run")
    store.write_json("state.json", {"status": "complete", "order": []})
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    r = _cli("status", f"s3://{s3.bucket}/run", "--endpoint-url", ep)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "build complete" in r.stdout


def test_an_endpoint_that_goes_away_is_one_sentence(tmp_path, monkeypatch):
    from forenset.testing.s3server import MotoServer

    with MotoServer(tmp_path) as server:
        for k, v in server.env().items():
            monkeypatch.setenv(k, v)
        server.create_bucket("gone")
        store = RunStore("s3://gone/run", StorageConfig(endpoint=server.env()["AWS_ENDPOINT_URL"]))
        store.write_json("state.json", {"status": "running"})
    with pytest.raises(StorageError) as e:  # the server stopped mid-build
        store.write_json("state.json", {"status": "complete"})
    assert str(e.value).startswith("Cannot reach the storage endpoint http://127.0.0.1:")
    with pytest.raises(StorageError):
        store.read_json("state.json")
