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

from forenset.confbase import Strict, url_userinfo, userinfo_problem
from forenset.errors import ForensetError

ENV_VAR = "FORENSET_STORAGE"
CONNECT_TIMEOUT_S = 10  # per connection attempt to an S3 endpoint
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
    anonymous: bool = False  # anonymously readable buckets: unsigned requests
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
    if not raw:
        return StorageConfig()
    try:
        return StorageConfig.model_validate_json(raw)
    except ValueError as e:  # pydantic's ValidationError: one sentence, not its report
        errs: list[Any] = getattr(e, "errors", lambda: [])()
        why = str(errs[0].get("msg", e)).removeprefix("Value error, ") if errs else str(e)
        raise StorageError(f"{ENV_VAR} is not valid storage settings: {why}.") from None


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


def use_endpoint(endpoint_url: str | None) -> None:
    """A command's ``--endpoint-url``: this process's stores (and the processes it starts) reach
    S3 there, over what ``FORENSET_STORAGE`` or ``AWS_ENDPOINT_URL`` say. Refused, in one
    sentence, when it holds a user name or password."""
    if not endpoint_url:
        return
    masked = url_userinfo(endpoint_url)
    if masked:
        raise StorageError(f"The {userinfo_problem('--endpoint-url', masked)}.")
    use_storage(default_storage().model_copy(update={"endpoint": endpoint_url}))


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
        # botocore waits 60 s per connection attempt by default (times its retries, times
        # s3fs's): an endpoint that drops packets would hold a build for many minutes before
        # its sentence (forenset.store.storage.unreachable_error)
        opts["config_kwargs"] = {"connect_timeout": CONNECT_TIMEOUT_S}
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


class StorageError(ForensetError, OSError):
    """The run directory's store cannot be used: its driver is not installed, its URI holds a
    secret, or its endpoint does not answer. The message is one sentence naming what to check."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "storage error"


# exceptions (by class name, so no driver is imported to name them) that say the endpoint did
# not answer at all: botocore's, aiohttp's (s3fs, gcsfs) and the socket's own
_UNREACHABLE = {
    "EndpointConnectionError",
    "ConnectTimeoutError",
    "ConnectionClosedError",
    "ReadTimeoutError",
    "ClientConnectorError",
    "ClientConnectionError",
    "ServerDisconnectedError",
    "ServerTimeoutError",
    "ConnectionRefusedError",
    "FSTimeoutError",
}
_DRIVERS = {"s3": ("s3fs", "s3"), "gcs": ("gcsfs", "gcs")}


def unreachable(exc: BaseException) -> bool:
    """``exc`` (or what caused it) says the store's endpoint could not be reached."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if any(c.__name__ in _UNREACHABLE for c in type(e).__mro__):
            return True
        e = e.__cause__ or e.__context__
    return False


def endpoint_of(uri: str, storage: StorageConfig | None = None) -> str:
    """The endpoint a store URI is reached at, as a user would name it."""
    storage = storage or default_storage()
    proto = protocol_of(uri)
    env = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    ep = storage.endpoint or (env if proto == "s3" else None)
    if ep:
        return url_userinfo(ep) or ep  # an endpoint from the environment may hold a key
    return {"s3": "AWS S3 (no endpoint set)", "gcs": "Google Cloud Storage"}.get(proto, proto)


def unreachable_error(uri: str, storage: StorageConfig | None = None) -> StorageError:
    ep = endpoint_of(uri, storage)
    return StorageError(
        f"Cannot reach the storage endpoint {ep} of {uri} (no connection, or it timed out): "
        "check that the server is up and this host can reach it, and the endpoint "
        "(storage.endpoint in the config, --endpoint-url, or AWS_ENDPOINT_URL)."
    )


class _Guarded:
    """An object-store filesystem whose calls raise ``StorageError`` (one sentence naming the
    endpoint) instead of a driver's traceback when the endpoint does not answer."""

    def __init__(self, fs: Any, uri: str, storage: StorageConfig | None):
        self._fs = fs
        self._uri = uri
        self._storage = storage

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_fs", "_uri", "_storage"):
            raise AttributeError(name)  # (unpickling looks these up before __dict__ is set)
        attr = getattr(self._fs, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except Exception as e:
                if isinstance(e, StorageError) or not unreachable(e):
                    raise
                raise unreachable_error(self._uri, self._storage) from e

        return call


def check_uri(uri: str) -> None:
    """Refuse a store URI with a user name or password in it (``s3://key:secret@bucket``): the
    URI is saved with the build and sent to Prefect as a flow-run parameter."""
    masked = url_userinfo(uri)
    if masked:
        raise StorageError(f"The run directory {userinfo_problem('URI', masked)}.")


def open_fs(uri: str, storage: StorageConfig | None = None) -> tuple[Any, str]:
    """``fsspec.core.url_to_fs`` with the run store's options (see the module docstring).

    One sentence (``StorageError``) for a URI holding credentials, a protocol whose driver is
    not installed (naming the extra), and, on every later call, an endpoint that does not
    answer."""
    check_uri(uri)
    proto = protocol_of(uri)
    try:
        fs, root = fsspec.core.url_to_fs(uri, **storage_options(uri, storage))
    except ImportError as e:
        module, extra = _DRIVERS.get(proto, (None, None))
        if module is None:
            raise StorageError(
                f"Run directory {uri} needs a filesystem driver that is not installed ({e})."
            ) from None
        raise StorageError(
            f"Run directory {uri} is on {'S3' if proto == 's3' else 'Google Cloud Storage'}, "
            f"which needs {module}: pip install 'forenset[{extra}]'."
        ) from None
    except ValueError as e:
        if "protocol" in str(e).lower():
            raise StorageError(f"Run directory {uri}: {e}.") from None
        raise
    from fsspec.implementations.local import LocalFileSystem

    if proto in _NO_DIRCACHE or isinstance(fs, LocalFileSystem):  # POSIX (NFS, a subclass): no
        return fs, root  # endpoint to lose, and the store must still see a local filesystem
    return _Guarded(fs, uri, storage), root
