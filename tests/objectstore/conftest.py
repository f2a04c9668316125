"""A real S3-compatible server (moto in server mode) on 127.0.0.1, one per test module.

Each test gets its own bucket, the server's endpoint and dummy credentials in ``AWS_*`` (what a
platform team's hosts have), and nothing else: no storage options are inherited between tests.
"""

from __future__ import annotations

import uuid

import pytest

from forenset.testing.s3server import MotoServer, moto_server_command


@pytest.fixture(scope="module")
def moto_server(tmp_path_factory):
    if moto_server_command() is None:
        pytest.fail("moto_server is missing: pip install -e '.[dev]' (moto[server])")
    with MotoServer(tmp_path_factory.mktemp("moto")) as server:
        yield server


@pytest.fixture
def s3(moto_server, monkeypatch):
    """The server, with this test's bucket created and ``AWS_*`` pointing at it."""
    for k, v in moto_server.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("FORENSET_STORAGE", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    bucket = f"forenset-{uuid.uuid4().hex[:12]}"
    moto_server.create_bucket(bucket)
    moto_server.bucket = bucket
    yield moto_server
