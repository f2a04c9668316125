"""Reading inputs named by URI: folders and CSVs through fsspec, Hugging Face datasets saved on
local disk (``hf:PATH``) and COCO-style caption JSON (``coco:PATH``).

Why one module: the sources stage (real photos) and the ``external`` image backend (edited
images made elsewhere) read the same kinds of listings; both get records whose image fields are
URIs that ``read_uri`` turns into bytes later, so a shard's params stay small JSON.

A record's image URI is an fsspec URI (a local path, ``file://``, ``memory://``, ``s3://`` …)
or ``hf:PATH#ROW/COLUMN`` for an image stored inside a dataset. A listing that cannot be read
(missing folder, a CSV without the needed column, an unknown prefix, ``datasets`` not installed)
raises ConfigurationError: every shard would hit it, so the build stops with that sentence.
"""

from __future__ import annotations

import csv
import io
import json
import posixpath
from functools import lru_cache
from typing import Any

from forenset.errors import ConfigurationError
from forenset.paths import ReadPolicy, read_bytes, read_text_file

HF = "hf:"
COCO = "coco:"


def _fs(uri: str) -> tuple[Any, str]:
    import fsspec

    try:
        return fsspec.core.url_to_fs(uri)
    except (ValueError, ImportError) as e:
        raise ConfigurationError(f"cannot open {uri!r}: {e}") from None


def join(base: str, rel: str) -> str:
    """``rel`` resolved against the folder URI ``base`` (absolute paths and URIs stay)."""
    if "://" in rel or rel.startswith("/") or not base:
        return rel
    if "://" in base:
        proto, path = base.split("://", 1)
        return f"{proto}://{posixpath.normpath(posixpath.join(path, rel))}"
    return posixpath.normpath(posixpath.join(base, rel))


def parent(uri: str) -> str:
    """The folder of a file URI (keeps the protocol)."""
    if "://" in uri:
        proto, path = uri.split("://", 1)
        return f"{proto}://{posixpath.dirname(path)}"
    return posixpath.dirname(uri)


def list_files(folder: str, extensions: set[str]) -> list[str]:
    """Files under ``folder`` (recursive, sorted) whose suffix is in ``extensions`` or empty."""
    fs, root = _fs(folder)
    if not fs.isdir(root):
        raise ConfigurationError(f"source folder {folder} does not exist")
    out = []
    for p in sorted(fs.find(root)):
        name = posixpath.basename(p)
        suffix = posixpath.splitext(name)[1].lower()
        if (suffix in extensions or not suffix) and not name.startswith("."):
            out.append(p if "://" not in folder else fs.unstrip_protocol(p))
    return out


def is_file(uri: str) -> bool:
    """Whether ``uri`` names an existing regular file (any fsspec filesystem)."""
    fs, path = _fs(uri)
    return bool(fs.isfile(path))


def read_uri(uri: str, policy: ReadPolicy | None = None) -> bytes:
    """The bytes an image URI names (OSError when it cannot be read). With a ``policy``
    (forenset.paths) the URI must lie inside its roots, be a regular file and fit its cap;
    a refusal is an ``InputRefused`` (an OSError) naming the reason."""
    if uri.startswith(HF):
        path, _, ref = uri[len(HF) :].rpartition("#")
        row, _, column = ref.partition("/")
        value = hf_dataset(path)[int(row)][column]
        data = image_bytes(value, path, policy)
        if data is None:
            raise OSError(f"row {row} of {path} has no image in column {column!r}")
        if policy is not None and len(data) > policy.max_bytes:
            raise OSError(f"row {row} of {path} is larger than the {policy.max_bytes}-byte cap")
        return data
    if policy is not None:
        return read_bytes(uri, policy)
    fs, path = _fs(uri)
    with fs.open(path, "rb") as f:
        return f.read()


def size_of(uri: str) -> int | None:
    """Size in bytes of a file URI, None for images inside datasets."""
    if uri.startswith(HF):
        return None
    fs, path = _fs(uri)
    return int(fs.size(path))


CSV_CELL_LIMIT = 131_072  # csv's default field limit: a longer cell is refused, not parsed


def read_csv(uri: str, required: tuple[str, ...]) -> list[dict[str, Any]]:
    """Rows of a CSV as dicts; ConfigurationError when it is missing, not a regular file, not
    UTF-8, lacks a column or holds a cell longer than ``CSV_CELL_LIMIT`` (one sentence naming
    the line, instead of csv's traceback)."""
    fs, path = _fs(uri)
    if not fs.isfile(path):
        raise ConfigurationError(f"CSV {uri} does not exist")
    try:
        if "://" not in uri or uri.startswith("file://"):
            text = read_text_file(uri.removeprefix("file://"))
        else:
            with fs.open(path, "rt", newline="") as f:
                text = f.read()
    except OSError as e:
        raise ConfigurationError(f"CSV {uri} cannot be read: {e}") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise ConfigurationError(f"CSV {uri} has no column {', '.join(missing)}")
        return list(reader)
    except csv.Error as e:
        raise ConfigurationError(
            f"CSV {uri} line {reader.line_num + 1} cannot be parsed ({e}; "
            f"cells are limited to {CSV_CELL_LIMIT} characters)"
        ) from None


@lru_cache(maxsize=8)
def hf_dataset(path: str) -> Any:
    """A dataset saved with ``save_to_disk`` (first split of a DatasetDict), images undecoded."""
    try:
        import datasets
    except ImportError:
        raise ConfigurationError(
            f"reading hf:{path} needs the 'datasets' package (pip install datasets)"
        ) from None
    try:
        ds = datasets.load_from_disk(path)
    except (FileNotFoundError, ValueError) as e:
        raise ConfigurationError(f"hf:{path} is not a dataset saved on disk: {e}") from None
    if isinstance(ds, datasets.DatasetDict):
        ds = ds[sorted(ds)[0]]
    for name, feat in ds.features.items():
        if isinstance(feat, datasets.Image) and feat.decode:
            ds = ds.cast_column(name, datasets.Image(decode=False))
    return ds


def image_bytes(value: Any, base: str = "", policy: ReadPolicy | None = None) -> bytes | None:
    """Bytes of a dataset image cell: {'bytes', 'path'} (undecoded Image), raw bytes, or a path."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, dict):
        if value.get("bytes"):
            return value["bytes"]
        value = value.get("path")
        if not value:
            return None
    if isinstance(value, str):
        return read_uri(join(base, value), policy)
    if hasattr(value, "save"):  # a decoded PIL image
        buf = io.BytesIO()
        value.save(buf, format="PNG")
        return buf.getvalue()
    return None


def hf_records(path: str, image_columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """Rows of ``hf:PATH`` with each image column replaced by an image URI."""
    ds = hf_dataset(path)
    missing = [c for c in image_columns if c not in ds.column_names]
    if missing:
        raise ConfigurationError(
            f"hf:{path} has no column {', '.join(missing)} (columns: {', '.join(ds.column_names)})"
        )
    others = [c for c in ds.column_names if c not in image_columns]
    table = ds.select_columns(others).to_list() if others else [{} for _ in range(len(ds))]
    # image cells are not read here (a large dataset would be loaded twice): an empty cell
    # fails when its URI is read, as a missing file does
    return [
        {**rec, **{c: f"{HF}{path}#{i}/{c}" for c in image_columns}} for i, rec in enumerate(table)
    ]


def coco_records(uri: str) -> list[dict[str, Any]]:
    """COCO caption JSON (``images`` + ``annotations``) as one record per image: ``uri`` (the
    file, relative to the JSON's folder unless absolute), ``caption`` (the first caption),
    ``captions`` (all), ``license`` (the licence's name or id)."""
    fs, path = _fs(uri)
    if not fs.isfile(path):
        raise ConfigurationError(f"COCO caption file {uri} does not exist")
    try:
        if "://" not in uri or uri.startswith("file://"):  # a regular file, capped
            doc = json.loads(read_text_file(uri.removeprefix("file://")))
        else:
            with fs.open(path, "rt") as f:
                doc = json.load(f)
        images = doc["images"]
    except OSError as e:
        raise ConfigurationError(f"COCO caption file {uri} cannot be read: {e}") from None
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        raise ConfigurationError(f"{uri} is not COCO caption JSON: {e!r}") from None
    licences = {
        lic.get("id"): lic.get("name") or lic.get("url")
        for lic in doc.get("licenses") or []
        if isinstance(lic, dict)
    }
    caps: dict[Any, list[str]] = {}
    for a in doc.get("annotations") or []:
        if isinstance(a, dict) and a.get("caption"):
            caps.setdefault(a.get("image_id"), []).append(str(a["caption"]).strip())
    base = parent(uri)
    out = []
    for im in images:
        if not isinstance(im, dict) or not im.get("file_name"):
            raise ConfigurationError(f"{uri}: an image entry has no file_name")
        cs = caps.get(im.get("id"), [])
        lic = im.get("license")
        out.append(
            {
                "uri": join(base, str(im["file_name"])),
                "name": posixpath.basename(str(im["file_name"])),
                "caption": cs[0] if cs else None,
                "captions": cs,
                "license": None if lic is None else str(licences.get(lic, lic)),
            }
        )
    return out
