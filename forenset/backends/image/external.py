"""External candidates: edited images made elsewhere, imported so they go through Edit-Check,
splits, perturbations and explanations like the pool's own (MultiFakeVerse-style inputs).

Why a generator backend: an imported edit is a candidate of a named generator like any other
(its own ``generator=`` partitions, held-out family, fingerprint), so adding a folder of edits
to the pool adds partitions and touches nothing else. The listing is one table with a row per
edit — source image, instruction, edited image, generator name — read from

- a folder holding ``metadata.csv`` (paths relative to the folder),
- a CSV (paths relative to the CSV's folder; any fsspec URI), or
- ``hf:PATH``, a Hugging Face dataset saved on local disk (image columns or path strings).

The sources stage lists the rows' source photos (``source_uris``), so they are hashed,
normalised and captioned as real photos; the candidates stage asks this backend for the edits
of the photos in each shard (task ``import``) by their content id. A row whose edited image is
missing or unreadable, has another size than its source photo, or has no instruction comes back
as an error with its reason; a row whose source photo cannot be read is a sources error row.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from pydantic import ValidationError

from forenset import paths, readers
from forenset.backends.image.base import EditRequest, GenerateRequest, ImageResult
from forenset.confbase import Strict
from forenset.errors import ConfigurationError, resource_exhausted, transient
from forenset.images import BadImage, normalise

MAX_PIXELS = 40_000_000


class ExternalOptions(Strict):
    """The ``options:`` of an ``external`` generator."""

    path: str  # folder with metadata.csv, a CSV, or hf:PATH
    source_column: str = "source"
    instruction_column: str = "instruction"
    edited_column: str = "edited"
    generator_column: str = "generator"  # the generator that made the edit (rows' ``model``)
    kind_column: str = "kind"  # optional: an edit kind of forenset.text.models.ALL_KINDS
    target_column: str = "target"  # optional: the edited entity, in the caption's words
    bbox_column: str = "bbox"  # optional: the edited region, "x0,y0,x1,y1" as image fractions
    only: str | None = None  # keep only rows whose generator column equals this
    # the read policy (forenset.paths): listed files must lie inside the listing's folder or
    # one of allowed_roots; URLs only with allow_remote (never private hosts unless allowed)
    allowed_roots: list[str] = []
    allow_remote: bool = False
    allow_private_hosts: bool = False
    max_file_mb: float = 64


def listing_table(opts: ExternalOptions) -> str:
    """The CSV of a folder or CSV listing."""
    path = opts.path
    return path if path.lower().endswith(".csv") else path.rstrip("/") + "/metadata.csv"


def listing_root(opts: ExternalOptions) -> str:
    """The folder the listing's paths must stay inside (the saved dataset for hf:)."""
    if opts.path.startswith(readers.HF):
        return opts.path[len(readers.HF) :]
    return readers.parent(listing_table(opts))


def listing_policy(opts: ExternalOptions) -> paths.ReadPolicy:
    return paths.ReadPolicy(
        (listing_root(opts),),
        allow_remote=opts.allow_remote,
        allow_private_hosts=opts.allow_private_hosts,
        max_bytes=int(opts.max_file_mb * 1024 * 1024),
        extra=tuple(opts.allowed_roots),
    )


def options_problem(options: dict[str, Any]) -> str | None:
    """The first problem of an ``external`` generator's ``options`` as one phrase, or None."""
    try:
        ExternalOptions.model_validate(options)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "options"
        return f"options.{where}: {first['msg']}"
    return None


def options_of(generator: Any) -> ExternalOptions:
    try:
        return ExternalOptions.model_validate(generator.options)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "options"
        raise ConfigurationError(
            f"external generator {generator.name}: options.{where}: {first['msg']}"
        ) from None


def records(opts: ExternalOptions) -> list[dict[str, Any]]:
    """One dict per listed edit: row, source, edited (URIs or None), instruction, generator,
    kind, target, bbox."""
    image_cols = (opts.source_column, opts.edited_column)
    path = opts.path
    if path.startswith(readers.HF):
        rows = readers.hf_records(path[len(readers.HF) :], image_cols)
        base = ""
    else:
        table = listing_table(opts)
        rows = readers.read_csv(table, image_cols + (opts.instruction_column,))
        base = readers.parent(table)
    out = []
    for i, r in enumerate(rows):
        gen = str(r.get(opts.generator_column) or "").strip() or None
        if opts.only is not None and gen != opts.only:
            continue
        src, edited = r.get(opts.source_column), r.get(opts.edited_column)
        src = src.strip() if isinstance(src, str) else src
        edited = edited.strip() if isinstance(edited, str) else edited
        out.append(
            {
                "row": i,
                "source": readers.join(base, src) if src else None,
                "edited": readers.join(base, edited) if edited else None,
                "instruction": str(r.get(opts.instruction_column) or "").strip(),
                "generator": gen,
                "kind": str(r.get(opts.kind_column) or "").strip() or None,
                "target": str(r.get(opts.target_column) or "").strip() or None,
                "bbox": parse_box(r.get(opts.bbox_column)),
            }
        )
    return out


def parse_box(value: Any) -> list[float] | None:
    """A box cell ("x0,y0,x1,y1" or a list, fractions of the image) or None when absent/invalid."""
    if value is None or value == "":
        return None
    parts = value if isinstance(value, list | tuple) else str(value).replace(",", " ").split()
    try:
        x0, y0, x1, y1 = (float(v) for v in parts)
    except (TypeError, ValueError):
        return None
    return [x0, y0, x1, y1] if 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1 else None


def source_uris(generator: Any, with_problems: bool = False) -> list[Any]:
    """The distinct source-photo URIs of an external generator's rows, in listing order. With
    ``with_problems``: (uri, problem) pairs, where a row that names no source photo is listed
    too (as ``<listing>#row=N``, with its problem), so it becomes an error row, not a gap."""
    opts = options_of(generator)
    seen: dict[str, str | None] = {}
    for r in records(opts):
        if r["source"]:
            seen.setdefault(r["source"], None)
        elif with_problems:
            where = f"{opts.path}#row={r['row']}"
            seen.setdefault(where, f"row {r['row']} of {opts.path} names no source photo")
    return list(seen.items()) if with_problems else list(seen)


def listing_id(generator: Any) -> str:
    """A content id of the listing (the CSV's bytes; a saved dataset's JSON files and its
    Arrow files' names, sizes and times), in the import shards' fingerprint: editing the
    listing re-imports that generator's edits and nothing else. Image files are not hashed; a
    file replaced under the same name is picked up when the listing changes."""
    opts = options_of(generator)
    path = opts.path
    h = hashlib.sha256()
    if path.startswith(readers.HF):
        import glob
        import os

        root = path[len(readers.HF) :]
        for f in sorted(glob.glob(os.path.join(root, "**", "*.json"), recursive=True)):
            h.update(f.encode())
            with open(f, "rb") as fh:
                h.update(fh.read())
        for f in sorted(glob.glob(os.path.join(root, "**", "*.arrow"), recursive=True)):
            st = os.stat(f)
            h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}".encode())
        return h.hexdigest()[:16]
    table = listing_table(opts)
    try:  # a regular file only (a FIFO named metadata.csv must not hang the build)
        h.update(readers.read_uri(table, paths.ReadPolicy((table,), True, True)))
    except OSError:
        h.update(b"missing")
    return h.hexdigest()[:16]


def image_id_of(data: bytes) -> str:
    """The sources stage's content id of a photo's original bytes."""
    return f"img-{hashlib.sha256(data).hexdigest()[:16]}"


class ExternalImports:
    """Registered as ``external``: imports listed edits (task ``import``), generates nothing."""

    name = "external"
    tasks = frozenset({"import"})
    edit_kinds: frozenset[str] = frozenset()  # executes no instruction: it imports finished edits

    def __init__(self, generator: Any, opts: ExternalOptions) -> None:
        self.generator = generator
        self.opts = opts
        self._index: tuple[str, dict[str, list[tuple[dict[str, Any], bytes]]]] | None = None
        self.policy = listing_policy(opts)

    @classmethod
    def from_generator(cls, generator: Any) -> ExternalImports:
        return cls(generator, options_of(generator))

    def by_image(self) -> dict[str, list[tuple[dict[str, Any], bytes]]]:
        """Rows by their source photo's content id (rows whose source cannot be read are left
        out: the sources stage reports that photo); read again when the listing changed (the
        backend lives as long as its worker process)."""
        lid = listing_id(self.generator)
        if self._index is None or self._index[0] != lid:
            self._index = (lid, self._read_index())
        return self._index[1]

    def _read_index(self) -> dict[str, list[tuple[dict[str, Any], bytes]]]:
        out: dict[str, list[tuple[dict[str, Any], bytes]]] = {}
        cache: dict[str, bytes | None] = {}
        for r in records(self.opts):
            if not r["source"]:
                continue
            if r["source"] not in cache:
                try:
                    cache[r["source"]] = readers.read_uri(r["source"], self.policy)
                except (OSError, KeyError, IndexError):
                    cache[r["source"]] = None
            data = cache[r["source"]]
            if data is not None:
                out.setdefault(image_id_of(data), []).append((r, data))
        return out

    def imports(self, image_ids: list[str]) -> list[tuple[str, dict[str, Any], ImageResult]]:
        """(image id, row, result) for every listed edit of these photos, in listing order."""
        out = []
        index = self.by_image()
        for image_id in image_ids:
            for rec, source in index.get(image_id, []):
                out.append((image_id, rec, self.load(rec, source)))
        return out

    def load(self, rec: dict[str, Any], source: bytes) -> ImageResult:
        """The edited image at full size (8-bit RGB), or an error saying what is wrong."""
        t0 = time.perf_counter()
        params = {"row": rec["row"], "edited": rec["edited"], "source": rec["source"]}
        model = rec["generator"] or "unknown"

        def fail(msg: str, retryable: bool = False) -> ImageResult:
            return ImageResult(None, "error", msg, retryable, time.perf_counter() - t0, model)

        if not rec["instruction"]:
            return fail(f"row {rec['row']} has no instruction")
        if not rec["edited"]:
            return fail(f"row {rec['row']} names no edited image")
        try:
            data = readers.read_uri(rec["edited"], self.policy)
        except paths.InputRefused as e:
            return fail(f"edited image refused: {e.reason}")
        except FileNotFoundError:
            return fail(f"edited image {rec['edited']} does not exist")
        except (OSError, KeyError, IndexError) as e:
            if resource_exhausted(e):
                raise  # out of descriptors or memory: the shard fails and is redone
            # an I/O error of a flaky mount is retried by the next build, never terminal
            return fail(f"edited image {rec['edited']} cannot be read: {e}", transient(e))
        try:
            edited = normalise(data, max_side=1 << 30, max_pixels=MAX_PIXELS)
        except BadImage as e:
            return fail(f"edited image {rec['edited']} is unreadable: {e}")
        try:
            src = normalise(source, max_side=1 << 30, max_pixels=MAX_PIXELS)
        except BadImage as e:
            return fail(f"source photo {rec['source']} is unreadable: {e}")
        if edited.image.size != src.image.size:
            ew, eh = edited.image.size
            sw, sh = src.image.size
            return fail(f"edited image is {ew}x{eh} but its source photo is {sw}x{sh}")
        return ImageResult(
            edited.image, latency_s=time.perf_counter() - t0, model=model, params=params
        )

    def generate(self, requests: list[GenerateRequest]) -> list[ImageResult]:
        return [
            ImageResult(None, "error", "external generators import edits only") for _ in requests
        ]

    def edit(self, requests: list[EditRequest]) -> list[ImageResult]:
        return [
            ImageResult(None, "error", "external generators import edits only") for _ in requests
        ]
