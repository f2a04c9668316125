"""Issue 40 on a real S3 endpoint (moto): fencing, and storage settings from a flag."""

from __future__ import annotations

import pytest

from forenset.store.run_store import RunStore
from forenset.store.storage import StorageConfig, StorageError
from tests.reliability.test_rel_storage import _cli, _fencing

# CLI builds report to this worker's Prefect server (conftest.py: prefect_api)
pytestmark = pytest.mark.usefixtures("prefect_api")


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


@pytest.mark.slow
def test_a_build_whose_endpoint_goes_away_ends_in_one_sentence(tmp_path, monkeypatch):
    """`forenset build` on s3:// (moto); the server stops once shards are committed: the build
    ends with the sentence naming the endpoint, exit 1, no traceback."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import yaml

    from forenset.testing.s3server import MotoServer
    from tests.reliability.clikit import tiny_config_dict

    with MotoServer(tmp_path) as server:
        for k, v in server.env().items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv("FORENSET_STORAGE", raising=False)
        server.create_bucket("vanishing")
        cfg = tmp_path / "cfg.yaml"
        cfg.write_text(yaml.safe_dump(tiny_config_dict("s3://vanishing/run")))
        build = subprocess.Popen(
            [sys.executable, "-m", "forenset.cli", "build", str(cfg)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            store = RunStore("s3://vanishing/run")
            deadline = time.monotonic() + 240
            while build.poll() is None and time.monotonic() < deadline:
                try:
                    if store.fs.find(store.path("stages")):
                        break  # shards are being committed: the build is mid-run
                except FileNotFoundError:
                    pass
                time.sleep(0.1)
            assert build.poll() is None, "the build ended before the endpoint went away"
            server.stop()
            _, err = build.communicate(timeout=300)
        finally:
            if build.poll() is None:
                os.killpg(build.pid, signal.SIGKILL)
                build.communicate()
    assert build.returncode == 1, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    text = " ".join(err[err.index("error:") :].split())
    assert f"Cannot reach the storage endpoint {server.endpoint} of s3://vanishing/run" in text
