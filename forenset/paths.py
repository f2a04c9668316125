"""One policy for every file a listing names (folder sources, CSV/HF/COCO sources, external
candidates, predictions and annotation files).

Why: a downloaded release's ``metadata.csv`` or a predictions file is data, not configuration.
A cell that says ``../../home/me/id_rsa``, ``/etc/passwd``, a symlink out of the folder,
``http://169.254.169.254/…`` or a FIFO must not make the build read or fetch it. So:

- a path resolves inside its listing's declared root (after ``..`` and symlinks are resolved)
  or inside one of the roots the config lists explicitly (``allowed_roots``);
- an ``http(s)://`` URL is read only when the config allows remote reads (``allow_remote``),
  and never from a loopback, link-local, private or reserved address unless
  ``allow_private_hosts`` says so too;
- only regular files are opened (a FIFO, a device such as ``/dev/zero``, a socket are refused
  without blocking: the open is non-blocking and checked with ``fstat``);
- reads are capped in bytes before anything is decoded;
- a name is at most ``MAX_NAME_CHARS`` long and holds no NUL byte; a name a *record* gives (an
  ``image_id`` looked up under a folder: :func:`under`) is also relative, without ``..``.

Every quoted name in a refusal is cut (``errors.clip``), so a 5 MB name gives a short reason.

A refusal raises :class:`~forenset.errors.InputRefused` (an ``OSError``, so the callers that
turn unreadable files into error rows do the same with it), whose message is the reason.
"""

from __future__ import annotations

import ipaddress
import os
import posixpath
import socket
import stat
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from forenset.errors import InputRefused, clip

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
MAX_NAME_CHARS = 4096  # Linux's PATH_MAX: a longer name cannot be opened (Errno 36)
REMOTE = ("http://", "https://")


@dataclass(frozen=True)
class ReadPolicy:
    """Where a listing may read from. ``roots``: the declared roots (local paths or fsspec
    URIs); ``allow_remote``: http(s) URLs; ``allow_private_hosts``: also loopback/private ones."""

    roots: tuple[str, ...] = ()
    allow_remote: bool = False
    allow_private_hosts: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    extra: tuple[str, ...] = field(default=())  # explicitly allowed roots (config)

    def with_root(self, *roots: str) -> ReadPolicy:
        return ReadPolicy(
            tuple(r for r in roots if r),
            self.allow_remote,
            self.allow_private_hosts,
            self.max_bytes,
            self.extra,
        )


def _is_local(uri: str) -> bool:
    return "://" not in uri or uri.startswith("file://")


def _local(uri: str) -> str:
    return uri.removeprefix("file://")


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # one relative, one absolute; different drives
        return False


def _norm_remote(uri: str) -> str:
    """``proto://path`` with the path as the URI's filesystem strips it, ``..`` resolved."""
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(uri)
    except (ValueError, ImportError):
        proto, _, path = uri.partition("://")
    else:
        proto = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return f"{proto}://{posixpath.normpath(path or '/')}"


def _inside_uri(uri: str, root: str) -> bool:
    u, r = _norm_remote(uri), _norm_remote(root).rstrip("/")
    return u == r or u.startswith(r + "/")


def host_refusal(url: str, allow_private: bool) -> str | None:
    """Why ``url``'s host may not be fetched (loopback, link-local, private, reserved), or None."""
    host = urlsplit(url).hostname
    if not host:
        return f"{url} names no host"
    if allow_private:
        return None
    try:
        infos = socket.getaddrinfo(host, None)
    except (OSError, UnicodeError) as e:
        return f"{url}: host {host} does not resolve ({e})"
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if (
            ip.is_loopback
            or ip.is_link_local
            or ip.is_private
            or ip.is_reserved
            or ip.is_multicast
            or ip.is_unspecified
        ):
            return (
                f"{url} points at a non-public address ({ip}); "
                "set allow_private_hosts to read from it"
            )
    return None


def check(uri: str, policy: ReadPolicy) -> str:
    """``uri`` if the policy lets it be read (a local path comes back resolved), else
    InputRefused with the reason."""
    if not uri:
        raise InputRefused("the listing names no file (empty cell)")
    _check_text(uri)
    if uri.startswith(REMOTE):
        if not policy.allow_remote:
            raise InputRefused(
                f"{uri} is a URL and remote reads are off (set allow_remote to read URLs)"
            )
        why = host_refusal(uri, policy.allow_private_hosts)
        if why:
            raise InputRefused(why)
        return uri
    roots = [*policy.roots, *policy.extra]
    if _is_local(uri):
        real = os.path.realpath(_local(uri))
        for root in roots:
            if _is_local(root) and _inside(real, os.path.realpath(_local(root))):
                return real
        raise InputRefused(_outside(uri, real, policy))
    for root in roots:
        if not _is_local(root) and _inside_uri(uri, root):
            return _norm_remote(uri)
    raise InputRefused(_outside(uri, uri, policy))


def _check_text(name: str) -> None:
    """InputRefused for a name no file can have: over ``MAX_NAME_CHARS``, or with a NUL byte."""
    if len(name) > MAX_NAME_CHARS:
        raise InputRefused(
            f"a name of {len(name):,} characters is longer than the {MAX_NAME_CHARS:,}-character "
            f"cap ({clip(name, 60)!r})"
        )
    if "\x00" in name:
        raise InputRefused(f"{clip(name)!r} holds a NUL byte")


def name_refusal(name: object) -> str | None:
    """Why ``name`` (an id a record gives, used as a file name under a folder) cannot name a
    file there, or None: not text, empty, too long, a NUL byte, absolute, or with a ``..``."""
    if not isinstance(name, str):
        return f"the name is a {type(name).__name__}, not text"
    if not name.strip():
        return "the name is empty"
    try:
        _check_text(name)
    except InputRefused as e:
        return e.reason
    drive = len(name) > 2 and name[0].isalpha() and name[1] == ":" and name[2] in "/\\"
    if name.startswith(("/", "\\")) or "://" in name or drive:
        return f"{clip(name)!r} is an absolute path or a URL, not a name inside the folder"
    if ".." in name.replace("\\", "/").split("/"):
        return f"{clip(name)!r} climbs out with '..', not a name inside the folder"
    return None


def under(root: str, name: object, subfolders: tuple[str, ...] = ("",)) -> str | None:
    """The first existing ``root/<sub>/name`` (resolved), or None when there is none;
    InputRefused when ``name`` is no plain name (:func:`name_refusal`) or the file resolves
    outside ``root`` (a symlink leading out). Read it with :func:`read_local`, which refuses
    what is not a regular file (a FIFO, a device, a folder)."""
    why = name_refusal(name)
    if why:
        raise InputRefused(why)
    assert isinstance(name, str)
    policy = ReadPolicy((root,))
    for sub in subfolders:
        p = os.path.join(root, sub, name) if sub else os.path.join(root, name)
        try:
            found = os.path.lexists(p)
        except (OSError, ValueError):
            found = False
        if found:
            return check(p, policy)
    return None


def _outside(uri: str, real: str, policy: ReadPolicy) -> str:
    where = ", ".join(policy.roots) or "(none)"
    via = f" (resolves to {clip(real)})" if real != uri and real != _local(uri) else ""
    uri = clip(uri)
    return (
        f"{uri}{via} is outside the listing's folder {where}; "
        "list its folder in allowed_roots to read it"
    )


def read_bytes(uri: str, policy: ReadPolicy) -> bytes:
    """The bytes of ``uri`` under ``policy``: checked, a regular file, at most ``max_bytes``."""
    target = check(uri, policy)
    cap = policy.max_bytes
    if _is_local(uri):
        return read_local(target, cap)
    import fsspec

    fs, path = fsspec.core.url_to_fs(target)
    info = fs.info(path)
    if info.get("type") not in (None, "file"):
        raise InputRefused(f"{uri} is not a regular file ({info.get('type')})")
    size = info.get("size")
    if isinstance(size, int) and size > cap:
        raise InputRefused(f"{uri} is larger than the {cap}-byte cap ({size} bytes)")
    with fs.open(path, "rb") as f:
        data = f.read(cap + 1)
    if len(data) > cap:
        raise InputRefused(f"{uri} is larger than the {cap}-byte cap")
    return data


def read_local(path: str, cap: int = DEFAULT_MAX_BYTES) -> bytes:
    """A local regular file's bytes, at most ``cap`` (InputRefused otherwise). Opened
    non-blocking, so a FIFO neither hangs the open nor gets read."""
    _check_text(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputRefused(f"{clip(path)} is not a regular file ({_kind(st.st_mode)})")
        if st.st_size > cap:
            raise InputRefused(
                f"{clip(path)} is larger than the {cap}-byte cap ({st.st_size} bytes)"
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        chunks, left = [], cap + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > cap:
        raise InputRefused(f"{path} is larger than the {cap}-byte cap")
    return data


def read_text_file(path: str | os.PathLike[str], cap: int = DEFAULT_MAX_BYTES) -> str:
    """A local regular file as UTF-8 text (a user-named import file: predictions, annotations,
    gold), capped in bytes before decoding; InputRefused/OSError with the reason otherwise."""
    data = read_local(os.fspath(path), cap)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputRefused(f"{path} is not UTF-8 text ({e.reason} at byte {e.start})") from None


def json_loads(text: str | bytes, what: str = "the file") -> Any:
    """JSON of a file a user hands in; ValueError with one sentence for bad JSON and for nesting
    past Python's recursion limit (``RecursionError`` is no ``ValueError``: uncaught, one
    100,000-deep answer file failed a whole shard)."""
    import json

    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply to be read as JSON") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{what} is not JSON (line {e.lineno}: {e.msg})") from None
    except ValueError as e:  # bytes that are not UTF-8/16/32
        raise ValueError(f"{what} is not JSON text ({clip(str(e), 120)})") from None


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a file"


RUN_MARKERS = ("state.json", "config.yaml", "stages")


def run_dir_problem(run_dir: str) -> str | None:
    """Why ``run_dir`` cannot be read as a run (missing, a file, a folder no build wrote), as
    one sentence for the CLI, or None. Remote URIs are checked by the store when read."""
    if "://" in run_dir and not run_dir.startswith("file://"):
        return None
    p = _local(run_dir)
    if not os.path.exists(p):
        return f"run directory {run_dir} does not exist"
    if not os.path.isdir(p):
        return f"{run_dir} is a file, not a run directory"
    if not any(os.path.exists(os.path.join(p, m)) for m in RUN_MARKERS):
        return (
            f"{run_dir} is not a forenset run directory (no state.json, config.yaml or stages/): "
            "run `forenset build` first"
        )
    cfg = os.path.join(p, "config.yaml")
    if os.path.lexists(cfg):  # the saved config every reader of the run may need
        import yaml

        try:
            doc = yaml.safe_load(read_text_file(cfg, 16 * 1024 * 1024))
        except (OSError, yaml.YAMLError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            return f"{cfg} is not a readable build config ({first})"
        if not isinstance(doc, dict):
            return f"{cfg} does not hold a build config (a mapping)"
    return None
