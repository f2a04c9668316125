"""Where a run directory lives and how to reach it: the ``storage:`` section of a config.

Only non-secret settings live in the config (and so in the run directory's ``config.yaml``):
endpoint, region, profile, anonymous access, and the *name* of a Prefect ``Secret`` block.
Keys and tokens come from the environment (``AWS_*``, ``GOOGLE_APPLICATION_CREDENTIALS``, a
profile's files) or from that block at run time; they are never written anywhere.

Every filesystem of the run store is made by ``open_fs``, which also turns off fsspec's
directory-listing cache: a listing cached by one process hides objects that other processes
(Dask workers, deployment runs on other hosts) commit afterwards.

A process passes its storage settings to the processes it starts (local Dask workers, process
pools) through ``FORENSET_STORAGE`` (JSON, non-secret fields only); workers on other hosts get
them from their own environment the same way.
"""

from __future__ import annotations

import json
import os
from typing import Any

import fsspec
from pydantic import Field, model_validator

from forenset.confbase import Strict

ENV_VAR = "FORENSET_STORAGE"
# options that would put a secret into the config (fsspec / s3fs / gcsfs spellings)
_SECRET_KEYS = {
    "key",
    "secret",
    "token",
    "password",
    "access_key",
    "secret_key",
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "session_token",
    "credentials",
}
# protocols whose filesystems keep no listing cache worth turning off, or take no such option
_NO_DIRCACHE = {"file", "local", "memory"}


class StorageConfig(Strict):
    """How to reach the run directory's object store (all fields optional)."""

    endpoint: str | None = None  # S3-compatible endpoint URL (MinIO, Ceph, R2...) or GCS emulator
    region: str | None = None  # S3 region
    profile: str | None = None  # AWS profile name (~/.aws/credentials, SSO...)
    anonymous: bool = False  # public buckets: unsigned requests
    # name of a Prefect Secret block whose value is a JSON object of fsspec credentials
    # (e.g. {"key": ..., "secret": ...} for S3, {"token": ...} for GCS); read at run time only
    credentials_block: str | None = None
    # a build holds the run directory under a lease it renews every lease_s / 3 seconds; a lock
    # whose holder stopped renewing for lease_s seconds is taken over (another host may have died)
    lock_lease_s: float = Field(120.0, ge=5, le=86_400)

    @model_validator(mode="before")
    @classmethod
    def _no_secrets(cls, data: Any) -> Any:
        if isinstance(data, dict):
            bad = sorted(k for k in data if str(k).lower() in _SECRET_KEYS)
            if bad:
                raise ValueError(
                    f"storage.{bad[0]} would write a secret into the run directory's config: "
                    "take credentials from the environment (AWS_*, GOOGLE_APPLICATION_CREDENTIALS, "
                    "a profile) or name a Prefect Secret block in storage.credentials_block"
                )
        return data

    def is_default(self) -> bool:
        return self == StorageConfig()


def use_storage(storage: StorageConfig | None) -> None:
    """Make ``storage`` this process's default, inherited by the processes it starts."""
    if storage is None or storage.is_default():
        os.environ.pop(ENV_VAR, None)
    else:
        os.environ[ENV_VAR] = storage.model_dump_json()


def default_storage() -> StorageConfig:
    """The settings this process inherited (``use_storage`` here or in a parent), else none."""
    raw = os.environ.get(ENV_VAR)
    return StorageConfig.model_validate_json(raw) if raw else StorageConfig()


def _credentials(block: str) -> dict[str, Any]:
    from prefect.blocks.system import Secret

    value = Secret.load(block).get()  # type: ignore[union-attr]  # sync_compatible: a Block, not a coroutine, outside an event loop
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise ValueError(f"Prefect Secret block {block!r} must hold a JSON object of credentials")
    return value


def protocol_of(uri: str) -> str:
    proto = uri.split("://", 1)[0] if "://" in uri else "file"
    return {"s3a": "s3", "gs": "gcs"}.get(proto, proto)


def storage_options(uri: str, storage: StorageConfig | None = None) -> dict[str, Any]:
    """fsspec keyword arguments for ``uri`` under ``storage`` (secrets included, in memory only)."""
    storage = storage or default_storage()
    proto = protocol_of(uri)
    opts: dict[str, Any] = {}
    if proto == "s3":
        client: dict[str, Any] = {}
        # botocore reads AWS_ENDPOINT_URL(_S3) itself, but s3fs caches filesystem instances by
        # their arguments: naming the endpoint keeps an instance of one server from being
        # reused for another (a changed environment, or tests starting a new server)
        endpoint = (
            storage.endpoint
            or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL")
        )
        if endpoint:
            opts["endpoint_url"] = endpoint
        if storage.region:
            client["region_name"] = storage.region
        if storage.profile:
            opts["profile"] = storage.profile
        if storage.anonymous:
            opts["anon"] = True
        if client:
            opts["client_kwargs"] = client
    elif proto == "gcs":
        if storage.endpoint:
            opts["endpoint_url"] = storage.endpoint
        if storage.anonymous:
            opts["token"] = "anon"
    if storage.credentials_block:
        opts.update(_credentials(storage.credentials_block))
    if proto not in _NO_DIRCACHE:
        opts["use_listings_cache"] = False
    return opts


def open_fs(uri: str, storage: StorageConfig | None = None) -> tuple[Any, str]:
    """``fsspec.core.url_to_fs`` with the run store's options (see the module docstring)."""
    return fsspec.core.url_to_fs(uri, **storage_options(uri, storage))
