"""diffusers backend: text-to-image and instruction editing on local GPUs (or CPU).

Why it is shaped like this:
- One pipeline load per worker process: loading a multi-GB checkpoint costs far more than a
  shard, so pipelines live in a process-level cache keyed by the resolved load config and are
  reused by every shard the worker runs.
- Batching by resolution bucket: a diffusers call needs one height/width, so requests are
  grouped by their (rounded) size and each group is cut into batches of ``batch_size``.
- One seeded ``torch.Generator`` (on CPU) per image: diffusers draws each item's initial noise
  from its own generator, so an item's pixels depend on its seed, not on its batch
  neighbours, and the noise is the same on CPU and GPU.
- CUDA out-of-memory halves the batch and retries down to 1; what still fails becomes an
  error row. Errors are ``ImageResult`` values, with one exception: a model that cannot be
  found or loaded (missing path, not a pipeline folder, hub id not available) raises
  ``ConfigurationError``, at construction or on the first load, since every row would fail
  the same way and the build should stop with that one sentence instead.
- Overlap (``overlap``, default on): the pipeline returns decoded tensors (``output_type="pt"``)
  and their conversion to PIL plus the resize back to the source size run on one worker
  thread while the next batch is denoised; at most ``overlap_depth`` batches wait there, so
  memory stays bounded. The PNG the stage stores is encoded there too (``ImageResult.png``,
  ``forenset.images.encode_png``: the same bytes the stage would make). The conversion is
  diffusers' own (``VaeImageProcessor.pt_to_numpy`` / ``numpy_to_pil``), so pixels are
  identical with overlap on or off, and rows keep their order.
"""

from __future__ import annotations

import gc
import importlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from forenset.backends.image.base import EditRequest, GenerateRequest, ImageResult
from forenset.backends.image.diffusers_config import DiffusersConfig
from forenset.errors import ConfigurationError
from forenset.images import encode_png

_DTYPES: dict[str, torch.dtype] = {
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
}


# ---------------------------------------------------------------- process-level pipeline cache

_CACHE: dict[str, Any] = {}
_CACHE_LOCK = threading.Lock()
# Pipelines keep per-call state (scheduler timesteps, guidance), so calls on one object are
# serialised even if a thread runner shares it.
_CALL_LOCKS: dict[int, threading.Lock] = {}
# Largest batch that did not run out of memory, per (pipeline, size): later shards in this
# process start there instead of paying for the same OOM again.
_SAFE_BATCH: dict[tuple[str, tuple[int, int]], int] = {}


def _call_lock(pipe: Any) -> threading.Lock:
    with _CACHE_LOCK:
        return _CALL_LOCKS.setdefault(id(pipe), threading.Lock())


def load_pipeline(config: DiffusersConfig) -> Any:
    """Return the pipeline for ``config``, loading it once per process (cached by load_key)."""
    key = config.load_key()
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = _load(config)
        return _CACHE[key]


def cached_pipeline_count() -> int:
    """How many pipelines this process holds (for tests and logs)."""
    return len(_CACHE)


def clear_pipeline_cache() -> None:
    """Drop every cached pipeline (frees GPU memory once nothing else references them)."""
    with _CACHE_LOCK:
        _CACHE.clear()
        _CALL_LOCKS.clear()
        _SAFE_BATCH.clear()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _load(config: DiffusersConfig) -> Any:
    import diffusers

    device = config.resolved_device()
    dtype = _DTYPES[config.resolved_dtype()]
    if config.cpu_offload and not device.startswith("cuda"):
        raise ValueError("cpu_offload needs a CUDA device")
    if config.tiny:
        from forenset.backends.image.tiny import build_tiny_pipeline

        pipe = build_tiny_pipeline(config.pipeline, seed=config.tiny_seed)  # float32
        if dtype != torch.float32:
            pipe = pipe.to(dtype=dtype)
    else:
        cls = getattr(diffusers, config.pipeline)
        kwargs: dict[str, Any] = {"torch_dtype": dtype, **config.load_kwargs}
        if config.revision:
            kwargs["revision"] = config.revision
        if config.variant:
            kwargs["variant"] = config.variant
        try:
            _import_forenset_components(config.model)
            pipe = cls.from_pretrained(config.model, **kwargs)
        except Exception as exc:
            if not _is_config_problem(exc):
                raise
            reason = " ".join(str(exc).split()).rstrip(".") or type(exc).__name__
            reason = reason if len(reason) <= 240 else reason[:240] + "..."
            where = "" if Path(config.model).is_dir() else "is not a local folder and "
            raise _config_error(config, f"{where}cannot be loaded ({reason})") from exc
    if config.scheduler:
        pipe.scheduler = getattr(diffusers, config.scheduler).from_config(pipe.scheduler.config)
    if config.cpu_offload:
        pipe.enable_model_cpu_offload(device=device)
    else:
        pipe.to(device)
    if config.compile:
        denoiser = "transformer" if getattr(pipe, "transformer", None) is not None else "unet"
        setattr(pipe, denoiser, torch.compile(getattr(pipe, denoiser)))
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _import_forenset_components(model: str) -> None:
    """Import the forenset modules a saved pipeline names in its model_index.json.

    A saved tiny QwenImageEdit names forenset's image-only processor class; diffusers resolves
    a component's module only if it is already imported (it never imports what a repository
    names), so a fresh worker could not load it. Only modules of this package are imported.
    """
    index = Path(model) / "model_index.json"
    if not index.is_file():
        return
    for value in json.loads(index.read_text()).values():
        if isinstance(value, list) and value and str(value[0]).startswith("forenset."):
            importlib.import_module(value[0])


def check_model_source(config: DiffusersConfig) -> None:
    """Raise ConfigurationError when ``config.model`` cannot name a loadable pipeline.

    Only what the file system (and the local hub cache) can tell: a path that does not exist,
    a folder without ``model_index.json``, a file, or a hub id that is not cached while
    HF_HUB_OFFLINE is set. Anything else is left to the load, which classifies its own errors.
    """
    if config.tiny:
        return
    model = config.model
    path = Path(model)  # as diffusers sees it: no ~ expansion, relative to the working dir
    if path.is_dir():
        if not (path / "model_index.json").is_file():
            raise _config_error(config, "is a folder without model_index.json, not a pipeline")
        return
    if path.exists():
        raise _config_error(config, "is a file, not a pipeline folder")
    from huggingface_hub import constants, try_to_load_from_cache
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(model)
    except HFValidationError:
        raise _config_error(config, "does not exist (and is not a Hugging Face model id)") from None
    if constants.HF_HUB_OFFLINE or config.load_kwargs.get("local_files_only"):
        cached = try_to_load_from_cache(
            model,
            "model_index.json",
            cache_dir=config.load_kwargs.get("cache_dir"),
            revision=config.revision,
        )
        if not isinstance(cached, str):
            raise _config_error(
                config, "is not a local folder and not in the Hugging Face cache (offline)"
            )


def resolved_revision(config: DiffusersConfig) -> str | None:
    """The hub commit a loaded hub-id model came from, read from the local cache (the snapshot
    folder's name): rows then name the exact weights even when ``revision`` was unset or a
    branch. A local folder or a tiny pipeline has no commit: the configured value (None)."""
    if config.tiny or Path(config.model).is_dir():
        return config.revision
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(
            config.model,
            "model_index.json",
            cache_dir=config.load_kwargs.get("cache_dir"),
            revision=config.revision,
        )
    except Exception:  # noqa: BLE001 - a bookkeeping lookup never fails a build
        return config.revision
    return Path(cached).parent.name if isinstance(cached, str) else config.revision


def _config_error(config: DiffusersConfig, problem: str) -> ConfigurationError:
    return ConfigurationError(f"diffusers model {config.model!r} ({config.pipeline}) {problem}.")


def _is_config_problem(exc: BaseException) -> bool:
    """Whether a ``from_pretrained`` failure is about what was configured, not a passing fault.

    Missing or malformed files, unknown or gated repos, a model that is not cached offline and
    a missing library are configuration; the hub or the network failing (5xx, timeouts) and
    running out of memory are not.
    """
    from huggingface_hub import errors

    names: tuple[str, ...] = (
        "OfflineModeIsEnabled",
        "RepositoryNotFoundError",
        "RevisionNotFoundError",
    )
    names += ("EntryNotFoundError", "RemoteEntryNotFoundError", "DisabledRepoError")
    config_errors = tuple(getattr(errors, n) for n in names if hasattr(errors, n))
    if isinstance(exc, config_errors):
        return True
    if isinstance(exc, errors.HfHubHTTPError | ConnectionError | TimeoutError):
        return False
    return isinstance(exc, OSError | ValueError | ImportError)


# ------------------------------------------------------------------------------ the backend


@dataclass
class _Item:
    """One request, normalised: where its result goes and what the pipeline gets."""

    index: int
    prompt: str
    seed: int
    size: tuple[int, int]  # (width, height) the pipeline runs at
    image: Image.Image | None = None  # edit source, already resized to ``size``
    source_size: tuple[int, int] | None = None  # edit source's original size


def _round_size(size: tuple[int, int], multiple: int) -> tuple[int, int]:
    w, h = size
    return (max(multiple, w // multiple * multiple), max(multiple, h // multiple * multiple))


def _edit_size(src: tuple[int, int], max_side: int | None, multiple: int) -> tuple[int, int]:
    w, h = src
    if max_side is not None and max(w, h) > max_side:
        scale = max_side / max(w, h)
        w, h = round(w * scale), round(h * scale)
    return _round_size((w, h), multiple)


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.cuda.OutOfMemoryError)


def _error(message: str, retryable: bool, model: str, revision: str | None) -> ImageResult:
    return ImageResult(
        image=None,
        status="error",
        error=message,
        retryable=retryable,
        model=model,
        revision=revision,
    )


class DiffusersBackend:
    """ImageBackend over one diffusers pipeline, chosen by class name in ``DiffusersConfig``.

    ``pipeline`` injects a ready pipeline object (tests wrap a tiny one); otherwise it is
    loaded lazily on first use through the process-level cache. A model path that cannot be a
    pipeline raises ConfigurationError here, before any row is tried.
    """

    name = "diffusers"

    def __init__(self, config: DiffusersConfig | dict[str, Any], pipeline: Any | None = None):
        if not isinstance(config, DiffusersConfig):
            config = DiffusersConfig.model_validate(config)
        self.config = config
        self.spec = self.config.spec
        self._pipeline = pipeline
        self._revision = self.config.revision  # the hub commit once a hub-id model is loaded
        if pipeline is None:
            check_model_source(self.config)
        self._resolved = self.config.resolved()
        self._oom_key = self.config.load_key() if pipeline is None else f"injected:{id(pipeline)}"

    # -- the ImageBackend interface

    def generate(self, requests: list[GenerateRequest]) -> list[ImageResult]:
        """Text-to-image, one result per request in request order."""
        if self.spec.task != "t2i":
            return self._all_errors(
                len(requests), f"{self.config.pipeline} is an edit pipeline; call edit()"
            )
        items, prefilled = [], {}
        for i, r in enumerate(requests):
            try:
                w, h = self.config.size or r.size
                if not isinstance(r.prompt, str) or int(w) < 8 or int(h) < 8:
                    raise ValueError(f"need a text prompt and a size of at least 8x8, got {r.size}")
                size = _round_size((int(w), int(h)), self.spec.multiple_of)
                items.append(_Item(i, r.prompt, int(r.seed), size))
            except Exception as exc:  # a malformed request is its own error row
                prefilled[i] = self._error(f"bad request: {_describe(exc)}", retryable=False)
        return self._run(items, len(requests), prefilled)

    def edit(self, requests: list[EditRequest]) -> list[ImageResult]:
        """Instruction editing; each output is resized back to its source photo's size."""
        if self.spec.task != "edit":
            msg = f"{self.config.pipeline} is a text-to-image pipeline; call generate()"
            return self._all_errors(len(requests), msg)
        items, prefilled = [], {}
        for i, r in enumerate(requests):
            text = (r.instruction or {}).get("text")
            if not isinstance(r.image, Image.Image) or not text:
                reason = "edit request needs a PIL image" if text else "instruction has no text"
                prefilled[i] = self._error(reason, retryable=False)
                continue
            try:
                src = r.image.convert("RGB")  # decodes lazily-loaded files: may fail here
                size = _edit_size(src.size, self.config.edit_max_side, self.spec.multiple_of)
                image = src if src.size == size else src.resize(size, Image.Resampling.LANCZOS)
                items.append(_Item(i, str(text), int(r.seed), size, image, src.size))
            except Exception as exc:
                prefilled[i] = self._error(f"bad source image: {_describe(exc)}", retryable=False)
        return self._run(items, len(requests), prefilled)

    def config_fingerprint(self) -> dict[str, Any]:
        """The resolved config (defaults filled in) that decides this backend's outputs."""
        return dict(self._resolved)

    # -- internals

    @property
    def pipeline(self) -> Any:
        if self._pipeline is None:
            self._pipeline = load_pipeline(self.config)
            self._revision = resolved_revision(self.config)
        return self._pipeline

    def _error(self, message: str, retryable: bool) -> ImageResult:
        return _error(message, retryable, self.config.model_id(), self._revision)

    def _all_errors(self, n: int, message: str, retryable: bool = False) -> list[ImageResult]:
        return [self._error(message, retryable) for _ in range(n)]

    def _run(
        self, items: list[_Item], n: int, prefilled: dict[int, ImageResult]
    ) -> list[ImageResult]:
        results: dict[int, ImageResult] = dict(prefilled)
        if items:
            try:
                self.pipeline  # noqa: B018 - load (or fetch from cache) before batching
            except ConfigurationError:
                raise  # the model itself is wrong: stop the shard (and the build), no error rows
            except Exception as exc:  # a load failure is every row's error, not a crash
                retry = _is_oom(exc) or isinstance(exc, OSError | ConnectionError | TimeoutError)
                msg = f"pipeline load failed: {_describe(exc)}"
                for it in items:
                    results[it.index] = self._error(msg, retryable=retry)
                items = []
        buckets: dict[tuple[int, int], list[_Item]] = {}
        for it in items:
            buckets.setdefault(it.size, []).append(it)
        post = _Post(self.config.overlap_depth if self.config.overlap and items else 0)
        try:
            for size, bucket in buckets.items():
                self._run_bucket(size, bucket, post)
            for it, res in post.drain():
                results[it.index] = res
        finally:
            post.close()
        return [results[i] for i in range(n)]

    def _run_bucket(self, size: tuple[int, int], bucket: list[_Item], out: _Post) -> None:
        """Run one size bucket in batches, halving the batch on CUDA OOM down to 1."""
        safe_key = (self._oom_key, size)
        bs = min(self.config.batch_size, _SAFE_BATCH.get(safe_key, self.config.batch_size))
        halvings = 0
        pos = 0
        while pos < len(bucket):
            chunk = bucket[pos : pos + bs]
            try:
                out.add(self._call(chunk, halvings))
                pos += len(chunk)
                continue
            except Exception as exc:  # noted here, handled below once the traceback is freed
                oom, desc, retry = _is_oom(exc), _describe(exc), _retryable(exc)
            if oom:
                _free_cuda()
                if len(chunk) > 1:
                    bs = len(chunk) // 2  # halve what was tried (a bucket's tail may be short)
                    halvings += 1
                    _SAFE_BATCH[safe_key] = bs
                    continue  # retry the same items with a smaller batch
                msg = f"CUDA out of memory at batch size 1 ({size[0]}x{size[1]}): {desc}"
                out.done([(chunk[0], self._error(msg, retryable=True))])
            elif len(chunk) > 1:
                self._one_by_one(chunk, halvings, out)  # isolate the failing item
            else:
                out.done([(chunk[0], self._error(desc, retry))])
            pos += len(chunk)

    def _one_by_one(self, chunk: list[_Item], halvings: int, out: _Post) -> None:
        for it in chunk:
            try:
                out.add(self._call([it], halvings))
                continue
            except Exception as exc:
                oom, desc, retry = _is_oom(exc), _describe(exc), _retryable(exc)
            if oom:
                _free_cuda()
            out.done([(it, self._error(desc, retry or oom))])

    def _call(
        self, chunk: list[_Item], halvings: int
    ) -> Callable[[], list[tuple[_Item, ImageResult]]]:
        """One pipeline call for a batch of same-size items; returns its post-processing.

        The denoising (and VAE decode) happens here; what is returned turns the decoded
        batch into results and may run on the overlap worker thread.
        """
        r = self._resolved
        spec = self.spec
        width, height = chunk[0].size
        kwargs: dict[str, Any] = {
            "prompt": [it.prompt for it in chunk],
            "num_inference_steps": r["steps"],
            "generator": [torch.Generator("cpu").manual_seed(it.seed % 2**64) for it in chunk],
            "output_type": "pt" if self.config.overlap else "pil",
            spec.guidance_kw: r["guidance_scale"],
        }
        if spec.image_guidance:
            kwargs["image_guidance_scale"] = r["image_guidance_scale"]
        if r["negative_prompt"] is not None:
            kwargs["negative_prompt"] = [r["negative_prompt"]] * len(chunk)
        if spec.pass_size:
            kwargs["height"], kwargs["width"] = height, width
        if spec.task == "edit":
            kwargs["image"] = [it.image for it in chunk]
        if spec.name == "FluxKontextPipeline":
            kwargs["max_area"] = width * height  # else Kontext rescales the output to ~1 MP
        kwargs.update(spec.extra_call)
        kwargs.update(self.config.call_kwargs)

        start = time.perf_counter()
        with _call_lock(self.pipeline), torch.inference_mode():
            images = self.pipeline(**kwargs).images
        elapsed = time.perf_counter() - start
        if len(images) != len(chunk):
            raise RuntimeError(f"pipeline returned {len(images)} images for {len(chunk)} prompts")
        if isinstance(images, torch.Tensor):
            # Copy to the host here, not on the worker: a copy issued from the worker would
            # queue on the device stream behind the next batch's kernels and wait for them.
            # diffusers' "pil" path makes the same .cpu() copy, so this costs nothing extra.
            images = images.detach().cpu()
        return lambda: self._finish(chunk, images, elapsed, halvings)

    def _finish(
        self, chunk: list[_Item], images: Any, elapsed: float, halvings: int
    ) -> list[tuple[_Item, ImageResult]]:
        """Decoded batch -> results: to PIL, resized back to the source; errors per item."""
        results = []
        for i, it in enumerate(chunk):
            try:
                results.append((it, self._result(it, _to_pil(images, i), chunk, elapsed, halvings)))
            except Exception as exc:  # one image that cannot be converted fails alone
                results.append(
                    (it, self._error(f"post-processing failed: {_describe(exc)}", False))
                )
        return results

    def _result(
        self, it: _Item, img: Image.Image, chunk: list[_Item], elapsed: float, halvings: int
    ) -> ImageResult:
        params = self._params(it, img, len(chunk), elapsed, halvings)
        if it.source_size is not None and img.size != it.source_size:
            img = img.resize(it.source_size, Image.Resampling.LANCZOS)
            params["resized_to_source"] = True
        img = img.convert("RGB")
        return ImageResult(
            image=img,
            latency_s=elapsed / len(chunk),
            model=self.config.model_id(),
            revision=self._revision,
            params=params,
            # the stage's PNG encoding, done here on the worker when overlapping
            png=encode_png(img) if self.config.overlap else None,
        )

    def _params(
        self, it: _Item, img: Image.Image, batch: int, elapsed: float, halvings: int
    ) -> dict[str, Any]:
        r = self._resolved
        p: dict[str, Any] = {
            "pipeline": self.config.pipeline,
            "steps": r["steps"],
            "guidance_scale": r["guidance_scale"],
            "negative_prompt": r["negative_prompt"],
            "width": img.width,
            "height": img.height,
            "dtype": r["dtype"],
            "device": r["device"],
            "seed": it.seed,
            "scheduler": type(self.pipeline.scheduler).__name__,
            "batch_size": batch,
            "batch_latency_s": elapsed,
            "oom_halvings": halvings,
            "cpu_offload": self.config.cpu_offload,
            "compile": self.config.compile,
            "tiny": self.config.tiny,
        }
        if self.spec.image_guidance:
            p["image_guidance_scale"] = r["image_guidance_scale"]
        if it.source_size is not None:
            p["instruction"] = it.prompt
            p["source_size"] = list(it.source_size)
        if self.config.call_kwargs:
            p["call_kwargs"] = dict(self.config.call_kwargs)
        return p


class _Post:
    """Post-processing of finished batches, in order: inline (depth 0) or on one thread.

    At most ``depth`` batches wait on the worker; adding one more first waits for the oldest,
    so decoded tensors held in memory stay bounded while the next batch is denoised.
    """

    def __init__(self, depth: int):
        self.depth = depth
        self._pool = ThreadPoolExecutor(1, "forenset-diffusers-post") if depth else None
        self._pending: deque[Future[list[tuple[_Item, ImageResult]]]] = deque()
        self._done: list[tuple[_Item, ImageResult]] = []

    def add(self, finish: Callable[[], list[tuple[_Item, ImageResult]]]) -> None:
        if self._pool is None:
            self._done.extend(finish())
            return
        while len(self._pending) >= self.depth:
            self._done.extend(self._pending.popleft().result())
        self._pending.append(self._pool.submit(finish))

    def done(self, results: list[tuple[_Item, ImageResult]]) -> None:
        self._done.extend(results)

    def drain(self) -> list[tuple[_Item, ImageResult]]:
        while self._pending:
            self._done.extend(self._pending.popleft().result())
        return self._done

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _to_pil(images: Any, i: int) -> Image.Image:
    """Item ``i`` of a pipeline's output as PIL, converted exactly as diffusers' "pil" does."""
    img = images[i]
    if isinstance(img, Image.Image):
        return img
    from diffusers.image_processor import VaeImageProcessor

    if isinstance(img, torch.Tensor):  # output_type="pt": CHW in [0, 1], maybe on the GPU
        arr = VaeImageProcessor.pt_to_numpy(img[None])
    else:  # output_type="np": HWC
        arr = np.asarray(img)[None]
    return VaeImageProcessor.numpy_to_pil(arr)[0]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def _retryable(exc: BaseException) -> bool:
    """Transient-looking failures are retried on resume; bad inputs/config are not."""
    return isinstance(exc, OSError | ConnectionError | TimeoutError)


def _free_cuda() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
