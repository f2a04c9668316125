"""A real S3-compatible server on 127.0.0.1 for tests and benchmarks: moto in server mode.

``moto_server`` (from ``moto[server]``, a dev dependency) is started as a child process on a
free loopback port and stopped by its PID. Its access log has one line per HTTP request, which
is how ``bench/object_store.py`` and the tests count requests from every process of a build
(the build itself, Dask workers, deployment runs) at one place.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "forenset-test",
    "AWS_SECRET_ACCESS_KEY": "forenset-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def moto_server_command() -> list[str] | None:
    exe = shutil.which("moto_server", path=os.path.dirname(sys.executable)) or shutil.which(
        "moto_server"
    )
    return [exe] if exe else None


class MotoServer:
    """``with MotoServer() as s3: ...`` — ``s3.endpoint``, ``s3.env()``, ``s3.requests()``."""

    def __init__(self, log_dir: str | Path | None = None):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = Path(log_dir or tempfile.mkdtemp(prefix="moto-")) / "moto.log"
        self.proc: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        """Dummy credentials and the endpoint, as a platform team's workers would have."""
        return {**DUMMY_ENV, "AWS_ENDPOINT_URL": self.endpoint}

    def start(self, timeout_s: float = 30) -> MotoServer:
        cmd = moto_server_command()
        if cmd is None:
            raise RuntimeError("moto_server is not installed: pip install 'moto[server]'")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [*cmd, "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto_server exited: {self.log.read_text()[-500:]}")
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1)  # noqa: S310
                return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"moto_server did not answer on {self.endpoint} in {timeout_s:.0f} s")

    def create_bucket(self, name: str) -> None:
        import boto3

        boto3.client("s3", endpoint_url=self.endpoint, **_client_kwargs()).create_bucket(
            Bucket=name
        )

    def request_lines(self) -> list[str]:
        """One access-log line per S3 request so far (moto's own API calls left out)."""
        lines = self.log.read_text(errors="replace").splitlines()
        return [ln for ln in lines if '"' in ln and "/moto-api" not in ln and " HTTP/" in ln]

    def requests(self) -> int:
        return len(self.request_lines())

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc = None

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _client_kwargs() -> dict[str, str]:
    return {
        "aws_access_key_id": DUMMY_ENV["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": DUMMY_ENV["AWS_SECRET_ACCESS_KEY"],
        "region_name": DUMMY_ENV["AWS_DEFAULT_REGION"],
    }
