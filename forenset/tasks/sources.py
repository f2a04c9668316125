"""sources: list the real photographs, hash them, normalise them into the blob store."""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import yaml
from pydantic import Field

from forenset import paths, readers
from forenset.confbase import Strict, operational
from forenset.errors import ConfigurationError, resource_exhausted, transient
from forenset.images import BadImage, encode_png, normalise
from forenset.schemas.sources import SCHEMA
from forenset.tasks.base import RowStage, ShardSpec, StageRowError, dumps

if TYPE_CHECKING:
    from forenset.backends.image.external import ExternalOptions
    from forenset.backends.image.generator import GeneratorConfig


class SourcesConfig(Strict):
    """Where the real photos come from. The listing fields decide which items (and so which
    shards) exist; each shard's params name its items, so they are not fingerprinted: adding a
    folder adds shards and recomputes none."""

    samples: Literal["all", "none"] | list[str] = operational("all")
    folders: list[str] = operational([])  # fsspec URIs (local paths, file://, s3://, memory://)
    csv: list[str] = operational([])  # fsspec URIs of CSVs with columns path[,caption,license]
    # CSVs read only when they exist (a photo set fetched by a script, e.g.
    # scripts/fetch_real_photos.sh): a config that uses one when present and runs without it
    csv_if_present: list[str] = operational([])
    # hf:PATH (a Hugging Face dataset saved with save_to_disk) or coco:PATH (COCO caption JSON)
    datasets: list[str] = operational([])
    hf_image_column: str = operational("image")
    hf_caption_column: str = operational("caption")
    hf_license_column: str = operational("license")
    extensions: list[str] = operational(
        [".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".bmp", ".gif"]
    )
    max_side: int = Field(512, ge=16, le=8192)  # normalised images are capped to this side
    max_pixels: int = Field(40_000_000, ge=1024)  # larger headers are refused (decompression bombs)
    max_file_mb: float = Field(64, gt=0)
    # the read policy (forenset.paths): a listed file must lie inside its listing's folder
    # (a folder, a CSV's or COCO file's folder, a saved dataset) or one of allowed_roots;
    # http(s) URLs only with allow_remote, and never private/loopback hosts unless allowed
    allowed_roots: list[str] = []
    allow_remote: bool = False
    allow_private_hosts: bool = False

    def input_problem(self) -> str | None:
        """A listed local CSV or folder that does not exist (remote URIs are checked by the
        stage, which may reach them): asked at config load (``forenset.config.load_config``)."""
        for kind, uris, isdir in (("CSV", self.csv, False), ("source folder", self.folders, True)):
            for uri in uris:
                if "://" in uri and not uri.startswith("file://"):
                    continue
                p = Path(uri.removeprefix("file://")).expanduser()
                if not (p.is_dir() if isdir else p.is_file()):
                    return f"{kind} {uri} does not exist"
        return None


def external_source_items(pool: Sequence[GeneratorConfig]) -> list[dict[str, Any]]:
    """The source photos of the pool's ``external`` generators (edited images made elsewhere),
    each listed once, so they are captioned, split and explained like any other photo."""
    from forenset.backends.image.external import listing_policy, options_of, source_uris

    out = []
    for gen in pool:
        if gen.backend != "external":
            continue
        policy = listing_policy(options_of(gen))
        for uri, problem in source_uris(gen, with_problems=True):
            name = posixpath.basename(uri)
            if uri.startswith(readers.HF):  # hf:PATH#ROW/COLUMN -> folder#ROW/COLUMN
                path, _, ref = uri.rpartition("#")
                name = f"{posixpath.basename(path.rstrip('/'))}#{ref}"
            item = {"source": "external", "name": name, "uri": uri, "generator": gen.name}
            refusal = problem or _refusal(uri, policy)
            if refusal:
                item["refused"] = refusal
            out.append(item)
    return out


def _refusal(uri: str, policy: paths.ReadPolicy) -> str | None:
    """Why the listing-time policy refuses ``uri`` (outside its listing's root, a URL), or None.
    Images inside a saved dataset (hf:) are checked when read."""
    if uri.startswith(readers.HF):
        return None
    try:
        paths.check(uri, policy)
    except paths.InputRefused as e:
        return e.reason
    return None


SAMPLES_FILE = Path(__file__).resolve().parent.parent / "data" / "samples.yaml"


@lru_cache(maxsize=1)
def sample_manifest() -> list[dict[str, Any]]:
    return yaml.safe_load(SAMPLES_FILE.read_text())


def load_sample_bytes(loader: str) -> bytes:
    """Bytes of a photo shipped inside scikit-image or scikit-learn."""
    pkg, name = loader.split(".", 1)
    if pkg == "skimage":
        import skimage.data

        arr = getattr(skimage.data, name)()
        if isinstance(arr, tuple):
            arr = arr[0]
        if arr.ndim == 2:
            arr = np.stack([arr] * 3, -1)
        return encode_png(arr[..., :3].astype(np.uint8))
    if pkg == "sklearn":
        return _sklearn_images_dir().joinpath(name).read_bytes()
    raise ValueError(f"unknown sample loader {loader!r}")


def _sklearn_images_dir() -> Path:
    """scikit-learn's sample-image folder, found without importing scikit-learn (~1 s)."""
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.origin:
        raise OSError("scikit-learn is not installed: its sample photos are unavailable")
    return Path(spec.origin).parent / "datasets" / "images"


@lru_cache(maxsize=4)
def _dist_version(pkg: str) -> str:
    from importlib.metadata import version

    return version({"skimage": "scikit-image", "sklearn": "scikit-learn"}.get(pkg, pkg))


HASH_CACHE = "_cache/source_hashes.json"


class Sources(RowStage[SourcesConfig]):
    name = "sources"
    config_model = SourcesConfig
    reads_config = ("generators",)  # the external generators' photos and read policy
    version = "2"  # 2: large photos decoded at a reduced scale (forenset.images.normalise)
    output_schema = SCHEMA
    key = "image_id"

    # -- listing -------------------------------------------------------------
    def list_items(self) -> list[dict[str, Any]]:
        c = self.cfg
        items: list[dict[str, Any]] = []
        wanted = c.samples
        for s in sample_manifest():
            if wanted == "all" or (isinstance(wanted, list) and s["name"] in wanted):
                items.append(
                    {
                        "source": "sample",
                        "name": s["name"],
                        "uri": f"sample://{s['loader']}",
                        "caption": s.get("caption"),
                        "entities": s.get("entities", []),
                        "license": s.get("license"),
                    }
                )
        if isinstance(wanted, list):
            known = {s["name"] for s in sample_manifest()}
            missing = [w for w in wanted if w not in known]
            if missing:
                raise ConfigurationError(f"unknown sample photo(s): {', '.join(missing)}")
        exts = {e.lower() for e in c.extensions}
        for folder in c.folders:
            policy = self.policy(folder)
            for uri in readers.list_files(folder, exts):
                item: dict[str, Any] = {
                    "source": "folder",
                    "name": posixpath.basename(uri),
                    "uri": uri,
                }
                items.append(self._refuse(item, policy))
        for table in self.csv_tables():
            base = readers.parent(table)
            policy = self.policy(base)
            for n, rec in enumerate(readers.read_csv(table, ("path",))):
                cell = (rec.get("path") or "").strip()
                uri = readers.join(base, cell) if cell else f"{table}#row={n}"
                item = {
                    "source": "csv",
                    "name": posixpath.basename(uri),
                    "uri": uri,
                    "caption": rec.get("caption") or None,
                    "license": rec.get("license") or None,
                }
                if not cell:
                    item["refused"] = f"row {n} of {table} names no file (empty path)"
                items.append(self._refuse(item, policy))
        for ds in c.datasets:
            items.extend(self.dataset_items(ds))
        items.extend(external_source_items(self.generator_pool()))
        return items

    def csv_tables(self) -> list[str]:
        """``csv`` and the ``csv_if_present`` files that exist (an absent one is skipped)."""
        c = self.cfg
        return [*c.csv, *(t for t in c.csv_if_present if readers.is_file(t))]

    def dataset_items(self, ds: str) -> list[dict[str, Any]]:
        """Items of one ``datasets:`` entry (hf:PATH or coco:PATH)."""
        c = self.cfg
        if ds.startswith(readers.COCO):
            policy = self.policy(readers.parent(ds[len(readers.COCO) :]))
            return [
                self._refuse(
                    {"source": "coco", **{k: r[k] for k in ("name", "uri", "caption", "license")}},
                    policy,
                )
                for r in readers.coco_records(ds[len(readers.COCO) :])
            ]
        if ds.startswith(readers.HF):
            path = ds[len(readers.HF) :]
            out = []
            for i, r in enumerate(readers.hf_records(path, (c.hf_image_column,))):
                uri = r[c.hf_image_column] or f"{readers.HF}{path}#{i}/{c.hf_image_column}"
                cap, lic = r.get(c.hf_caption_column), r.get(c.hf_license_column)
                out.append(
                    {
                        "source": "hf",
                        "name": f"{posixpath.basename(path.rstrip('/'))}#{i}",
                        "uri": uri,
                        "caption": str(cap) if cap else None,
                        "license": str(lic) if lic else None,
                    }
                )
            return out
        raise ConfigurationError(
            f"sources.datasets entry {ds!r} must start with hf: (a dataset saved on disk) "
            "or coco: (COCO caption JSON)"
        )

    def policy(self, *roots: str) -> paths.ReadPolicy:
        """The read policy of a listing rooted at ``roots`` (all declared roots when none)."""
        c = self.cfg
        return paths.ReadPolicy(
            tuple(roots) if roots else self.declared_roots(),
            allow_remote=c.allow_remote or self._external_flag("allow_remote"),
            allow_private_hosts=c.allow_private_hosts or self._external_flag("allow_private_hosts"),
            max_bytes=int(c.max_file_mb * 1024 * 1024),
            extra=tuple(c.allowed_roots) + self._external_roots(),
        )

    def generator_pool(self) -> list[GeneratorConfig]:
        """The candidates stage's generator pool (its ``external`` generators list photos)."""
        from forenset.backends.image.generator import GeneratorConfig  # noqa: F811 - at run time

        return self.config_of("generators", list[GeneratorConfig])

    def read_config_view(self, section: str, value: Any) -> Any:
        """Of the generator pool, the external generators' read policy, which the reads of
        every row go through (``policy``); their listed photos are in the shard params. None
        without an external generator, so the pool's other generators never recompute sources."""
        opts = self._externals()
        if not opts:
            return None
        from forenset.backends.image.external import listing_root

        return {
            "allow_remote": any(o.allow_remote for o in opts),
            "allow_private_hosts": any(o.allow_private_hosts for o in opts),
            "roots": [*self._external_roots(), *(listing_root(o) for o in opts)],
        }

    def _externals(self) -> list[ExternalOptions]:
        from forenset.backends.image.external import options_of

        return [options_of(g) for g in self.generator_pool() if g.backend == "external"]

    def _external_flag(self, name: str) -> bool:
        return any(getattr(o, name) for o in self._externals())

    def _external_roots(self) -> tuple[str, ...]:
        return tuple(r for o in self._externals() for r in o.allowed_roots)

    def declared_roots(self) -> tuple[str, ...]:
        """Every listing's root: the folders, the CSVs' and COCO files' folders, the saved
        datasets, the external generators' folders."""
        from forenset.backends.image.external import listing_root

        c = self.cfg
        roots = [*c.folders, *(readers.parent(t) for t in self.csv_tables())]
        for ds in c.datasets:
            if ds.startswith(readers.COCO):
                roots.append(readers.parent(ds[len(readers.COCO) :]))
            elif ds.startswith(readers.HF):
                roots.append(ds[len(readers.HF) :])
        roots.extend(listing_root(o) for o in self._externals())
        return tuple(roots)

    @staticmethod
    def _refuse(item: dict[str, Any], policy: paths.ReadPolicy) -> dict[str, Any]:
        """``item`` with ``refused`` set when the listing's policy refuses its URI."""
        if "refused" not in item:
            why = _refusal(item["uri"], policy)
            if why:
                item["refused"] = why
        return item

    def read_item(self, item: dict[str, Any]) -> bytes:
        uri = item["uri"]
        if item.get("refused"):
            raise StageRowError(f"refused: {item['refused']}")
        if uri.startswith("sample://"):
            return load_sample_bytes(uri.removeprefix("sample://"))
        limit = int(self.cfg.max_file_mb * 1024 * 1024)
        if not uri.startswith(readers.HF) and "://" not in uri:
            try:
                paths.check(uri, self.policy())  # a symlink leading out, before any stat
            except paths.InputRefused as e:
                raise StageRowError(f"refused: {e.reason}") from None
        size = readers.size_of(uri)
        if size is not None and size > limit:
            raise StageRowError(f"file is larger than max_file_mb ({size} bytes)")
        try:
            data = readers.read_uri(uri, self.policy())
        except paths.InputRefused as e:
            raise StageRowError(f"refused: {e.reason}") from None
        if len(data) > limit:
            raise StageRowError(f"file is larger than max_file_mb ({len(data)} bytes)")
        return data

    def plan_sources(self) -> list[ShardSpec]:
        """Hash every item up front so ids are content based and duplicates are found globally."""
        items = self.list_items()
        seen: dict[str, str] = {}
        store = self.ctx.store
        cache: dict[str, str] = store.read_json(HASH_CACHE, default=None) or {}
        fresh: dict[str, str] = {}
        kept: list[dict[str, Any]] = []
        for it in items:
            try:
                key = self._hash_key(it)
                sha = cache.get(key) if key else None
                if sha is None:
                    sha = hashlib.sha256(self.read_item(it)).hexdigest()
                if key:
                    fresh[key] = sha
            except (OSError, StageRowError, KeyError, IndexError) as e:
                if resource_exhausted(e):
                    raise  # out of descriptors or memory while planning: stop, rerun later
                sha = hashlib.sha256(f"unreadable:{it['uri']}".encode()).hexdigest()
                it["read_error"] = str(e)
                if transient(e):  # an I/O error of a flaky mount: retried by the next build
                    it["read_retryable"] = True
            it["sha256"] = sha
            it["image_id"] = f"img-{sha[:16]}"
            if sha in seen:
                if it["source"] == "external":
                    continue  # several imported edits of one photo: the photo is listed once
                it["duplicate_of"] = seen[sha]
            else:
                seen[sha] = it["image_id"]
            kept.append(it)
        items = kept
        if fresh != cache:
            store.write_json(HASH_CACHE, fresh)
        size = self.ctx.config.shard_size
        specs = []
        for n, start in enumerate(range(0, len(items), size)):
            chunk = items[start : start + size]
            specs.append(self.spec(f"shard-{n:05d}", {}, [], {"items": chunk}))
        return specs

    def _hash_key(self, item: dict[str, Any]) -> str | None:
        """What a cached sha256 of the item is valid for, so planning (every build, no-op
        reruns too) does not read and hash every photo again: a file's path, size and mtime
        (as git's index does), a bundled sample's loader and package version. None: no cache
        (a file over ``max_file_mb`` is read, to fail with its reason)."""
        uri = item["uri"]
        if item.get("refused"):
            return None
        if uri.startswith("sample://"):
            loader = uri.removeprefix("sample://")
            return f"{uri}|{_dist_version(loader.split('.', 1)[0])}"
        if uri.startswith(readers.HF) or ("://" in uri and not uri.startswith("file://")):
            return None  # remote (fsspec) or in-dataset bytes: no cheap stat to key a cache on
        try:
            st = Path(uri.removeprefix("file://")).stat()
        except OSError:
            return None  # read_item says why
        if st.st_size > self.cfg.max_file_mb * 1024 * 1024:
            return None
        return f"{uri}|{st.st_size}|{st.st_mtime_ns}"

    def read_inputs(self, shard: ShardSpec) -> Any:
        import pyarrow as pa

        return pa.Table.from_pylist([{"item": dumps(i)} for i in shard.params["items"]])

    # -- processing ------------------------------------------------------------
    def process_row(self, row: dict[str, Any], shard: ShardSpec | None):
        import json

        it = json.loads(row["item"]) if "item" in row else row
        base = {
            "image_id": it["image_id"],
            "source": it["source"],
            "name": it["name"],
            "uri": it["uri"],
            "sha256": it["sha256"],
            "license": it.get("license"),
            "caption": it.get("caption"),
            "entities": dumps(it.get("entities") or []),
            "backend": "offline",
            "model": "pillow",
        }
        if it.get("read_error"):
            raise StageRowError(
                f"cannot read {it['uri']}: {it['read_error']}", bool(it.get("read_retryable"))
            )
        if it.get("duplicate_of"):
            raise StageRowError(f"duplicate of {it['duplicate_of']} (identical bytes)")
        data = self.read_item(it)
        c = self.cfg
        try:
            n = normalise(data, max_side=c.max_side, max_pixels=c.max_pixels)
        except BadImage as e:
            raise StageRowError(f"{it['name']}: {e}") from None
        blob = self.ctx.store.put_blob(encode_png(n.image))
        yield {
            **base,
            "blob": blob,
            "width": n.image.width,
            "height": n.image.height,
            "orig_width": n.orig_width,
            "orig_height": n.orig_height,
            "orig_mode": n.orig_mode,
            "orig_format": n.orig_format,
            "normalisations": n.steps,
        }

    def error_row(self, row: dict[str, Any], message: str, retryable: bool) -> dict[str, Any]:
        import json

        it = json.loads(row["item"])
        keep = {k: it.get(k) for k in ("image_id", "source", "name", "uri", "sha256", "license")}
        return {
            **keep,
            "status": "error",
            "error": message,
            "retryable": retryable,
            "backend": "offline",
            "model": "pillow",
        }
