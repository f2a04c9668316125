"""What every importer shares: the imported record's shape, error rows, and reads through the
one read policy (``forenset.paths``), so a release's file that names ``/etc/passwd``, climbs
out with ``..`` or is a symlink out of the folder becomes an error row, never a read.

A record is a dict with the columns of ``public_items`` plus ``images``: the image paths
(resolved inside the release's folder) or image bytes (parquet releases). The stage turns
``images`` into blobs; an importer never reads image files itself.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from typing import Any

from forenset import paths
from forenset.errors import InputRefused, clip

TASKS = ("judgement", "multiple_choice", "explanation")
MAX_ANNOTATION_BYTES = 1024 * 1024 * 1024  # a release's annotation file (FakeClue train: ~300 MB)


def record(benchmark: str, task: str, record_id: str, **cols: Any) -> dict[str, Any]:
    """One ok item: ``item_id`` is ``<benchmark>/<task>/<record id>``."""
    return {
        "item_id": f"{benchmark}/{task}/{record_id}",
        "benchmark": benchmark,
        "task": task,
        "record_id": record_id,
        "status": "ok",
        **cols,
    }


def error(benchmark: str, task: str, record_id: str, reason: str) -> dict[str, Any]:
    """One bad record as a row: the import goes on."""
    return {
        **record(benchmark, task, clip(str(record_id), 200)),
        "status": "error",
        "error": reason,
        "retryable": False,
    }


def decode_text(data: bytes, what: str) -> str:
    """Text of an annotation file: UTF-8 (BOM or not) or UTF-16 with its BOM (LOKI's
    ``open_ended_vqa.json`` is UTF-16 LE)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{what} is not UTF-8 or UTF-16 text ({e.reason} at byte {e.start})"
        ) from None


def read_json(path: str) -> Any:
    """A release's JSON file, read under the policy's byte cap; ValueError (one sentence) when
    it is not JSON."""
    data = paths.read_local(path, MAX_ANNOTATION_BYTES)
    name = os.path.basename(path)
    return paths.json_loads(decode_text(data, name), name)


def find(root: str, candidates: Iterable[str]) -> str | None:
    """The first of ``candidates`` (names relative to ``root``) that exists, resolved inside
    ``root`` (a symlink out raises InputRefused)."""
    for c in candidates:
        got = paths.under(root, c)
        if got is not None:
            return got
    return None


def given(root: str, name: str) -> str:
    """A file the config names: absolute as given (the user named it), else under ``root``."""
    return name if os.path.isabs(name) else os.path.join(root, name)


def annotation_file(root: str, named: str | None, candidates: tuple[str, ...], what: str) -> str:
    """The annotation file: ``named`` (the config's, relative to ``root`` or absolute: the user
    named it), else the first candidate at the release's place. FileNotFoundError otherwise."""
    if named:
        p = given(root, named)
        if not os.path.isfile(p):
            raise FileNotFoundError(f"{what} {named} does not exist")
        return p
    got = find(root, candidates)
    if got is None:
        raise FileNotFoundError(
            f"no {what} under {root} (looked for {', '.join(candidates)}); name it in "
            "public.benchmarks[].annotations"
        )
    return got


def image_path(root: str, name: object, subfolders: tuple[str, ...] = ("",)) -> str:
    """The image a record names, resolved inside ``root`` (under one of ``subfolders``);
    InputRefused for a hostile name or a symlink out, FileNotFoundError when it is missing."""
    got = paths.under(root, name, subfolders)
    if got is None:
        where = ", ".join(s or "." for s in subfolders)
        raise FileNotFoundError(f"image {clip(str(name))!r} is not in {root} (looked in {where})")
    return got


def reason(e: BaseException) -> str:
    """The one sentence of a refused or failed read."""
    if isinstance(e, InputRefused):
        return e.reason if hasattr(e, "reason") else str(e)
    if isinstance(e, FileNotFoundError | ValueError):
        return str(e)
    return f"{type(e).__name__}: {e}"


def files_digest(files: Iterable[str], root: str) -> str:
    """A cheap fingerprint of what an importer reads: each file's path relative to ``root``, size
    and modification time (hashing a 100 GB release on every plan is not an option)."""
    h = hashlib.sha256()
    for f in sorted(files):
        try:
            st = os.stat(f)
            h.update(f"{os.path.relpath(f, root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        except OSError:
            h.update(f"{f}\0missing\n".encode())
    return h.hexdigest()
