"""Build configuration: YAML validated by pydantic. Unknown keys are errors, named in one sentence.

``BuildConfig`` is assembled from the stage registry: the build-wide fields below, plus one
section per stage, typed by that stage's own ``config_model`` (``forenset.stages``). A plugin
stage's section appears in the config as soon as its package is installed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

import yaml
from pydantic import Field, ValidationError, create_model, model_validator

from forenset.confbase import ConfigError, Strict, find_userinfo, operational, userinfo_problem
from forenset.exports.settings import ExportSettings
from forenset.stages import stage_classes
from forenset.store.storage import StorageConfig

if TYPE_CHECKING:
    from forenset.tasks.base import Stage

T = TypeVar("T")

DEFAULT_CONFIG = Path(__file__).resolve().parent / "data" / "demo.yaml"


__all__ = [
    "BuildConfig",
    "ConfigError",
    "RunnerConfig",
    "load_config",
    "section",
    "validate_config",
]


THREAD_TASK_SECONDS = 1.0  # default min_task_seconds of a thread runner
PROCESS_TASK_SECONDS = 20.0  # ... of a process, Dask or Ray runner


_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?)?B?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def memory_bytes(value: int | str) -> int:
    """``16Gi``, ``16G``, ``512Mi`` or a byte count as bytes (Kubernetes' quantity suffixes)."""
    if isinstance(value, int):
        return value
    m = _MEMORY.match(value)
    if not m:
        raise ValueError(f"memory {value!r} is not a size such as 16Gi, 512M or 1000000000")
    unit = (m.group(2) or "").upper()
    base = 1024 ** "KMGT".index(unit[0]) * 1024 if unit.endswith("I") else _UNITS[unit]
    return int(float(m.group(1)) * base)


class Resources(Strict):
    """What one shard task of a stage needs: Dask worker resources (``GPU``, ``CPU``,
    ``MEMORY``), Ray ``num_gpus``/``num_cpus``/``memory``, and the ``gpus``/``cpus``/``memory``
    job variables of a deployment run (a Kubernetes work pool maps them to the pod's requests,
    docs/cluster.md)."""

    gpus: float = Field(0, ge=0, le=64)
    cpus: float | None = Field(None, gt=0, le=1024)
    memory: int | str | None = None  # bytes or a Kubernetes quantity (16Gi)

    @model_validator(mode="after")
    def _memory(self) -> Resources:
        if self.memory is not None:
            memory_bytes(self.memory)  # refuse a bad size now, in one sentence
        return self

    def memory_in_bytes(self) -> int | None:
        return None if self.memory is None else memory_bytes(self.memory)

    def dask(self) -> dict[str, float]:
        """Abstract Dask resources: workers must declare them (``dask worker --resources
        "GPU=1 MEMORY=48e9"``), else a task asking for one waits for a worker that has it."""
        out: dict[str, float] = {}
        if self.gpus:
            out["GPU"] = self.gpus
        if self.cpus:
            out["CPU"] = self.cpus
        if self.memory is not None:
            out["MEMORY"] = float(self.memory_in_bytes() or 0)
        return out

    def ray(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {}
        if self.gpus:
            out["num_gpus"] = self.gpus
        if self.cpus:
            out["num_cpus"] = self.cpus
        if self.memory is not None:
            out["memory"] = self.memory_in_bytes() or 0
        return out

    def job_variables(self) -> dict[str, Any]:
        """Job variables of a deployment run; a Kubernetes pool's base job template uses them
        (``deploy/kubernetes-gpu-job-template.json``). Memory keeps the Kubernetes quantity."""
        out: dict[str, Any] = {}
        if self.gpus:
            out["gpus"] = self.gpus if self.gpus % 1 else int(self.gpus)
        if self.cpus:
            out["cpus"] = self.cpus if self.cpus % 1 else int(self.cpus)
        if self.memory is not None:
            out["memory"] = str(self.memory)
        return out


class RunnerConfig(Strict):
    """Where a stage's shard tasks run. threads suit API-bound stages, processes CPU-bound ones."""

    kind: Literal["threads", "processes", "dask", "ray", "deployment"] = "threads"
    max_workers: int = Field(4, ge=1, le=512)
    # dask scheduler / ray cluster address; None starts a local cluster of max_workers CPUs
    address: str | None = None
    # kind=deployment: shards are sent in batches to a deployed shard flow (e.g. on a GPU pool),
    # so each run loads its model once and processes many shards. The run dir must be shared.
    deployment: str | None = None  # "<flow name>/<deployment name>", e.g. "forenset-shards/gpu"
    batch_shards: int = Field(16, ge=1, le=10_000)
    batch_wait_s: float = Field(2.0, ge=0, le=600)  # how long to gather shards before a run starts
    max_concurrent_runs: int = Field(4, ge=1, le=1024)
    # tag shard tasks "forenset:<stage>" so a Prefect tag concurrency limit can cap them. Off by
    # default: Prefect takes a concurrency lease through the API for every tagged task run
    # (~0.4 s each on a loaded 2-core machine, bench/overhead.py), even with no limit set.
    concurrency_tag: bool = False
    # Task bundling. Shards stay the unit of resume and caching; a Prefect task may run several
    # shards of one stage in a row, so that tiny shards do not pay Prefect's per-task cost each.
    # Once a stage's shards have been timed in this build, a task takes enough queued shards for
    # about `min_task_seconds` of work (never more than `max_task_shards`, and never so many that
    # a free worker would stay idle). 0 runs one shard per task. Deployments batch on their own.
    # Default (None): see task_seconds().
    min_task_seconds: float | None = Field(None, ge=0, le=3600)
    max_task_shards: int = Field(64, ge=1, le=100_000)
    # Tasks in flight on this runner; shards beyond them wait in the scheduler, where they can
    # be bundled. Default: max_workers for threads, 2 x max_workers for processes, dask and ray
    # (a queued task hides their ~0.15 s dispatch). With `address:` the cluster's size is not
    # known here: every shard is submitted when planned (no bundling) unless this is set.
    inflight: int | None = Field(None, ge=1, le=1_000_000)
    # Lost workers. A task whose worker died, whose deployment run crashed or stopped sending
    # heartbeats, or that ran past `timeout_s` is run again (same shards, same rows: commits
    # are atomic and idempotent) at most `retries` times; then its shards fail with the reason.
    # Shard errors the stage itself raised are not retried (they would fail alike).
    retries: int = Field(2, ge=0, le=100)
    timeout_s: float | None = Field(None, gt=0, le=7 * 24 * 3600)  # per task; None: no limit
    # kind=deployment: each shard-batch run writes a heartbeat to the run store every
    # `heartbeat_s`; a run RUNNING without one for `lost_after_s` is presumed lost (its worker
    # died), is marked Crashed through the API (freeing the deployment's concurrency slot) and
    # its batch re-run. A run still waiting for a worker (SCHEDULED/PENDING) is not lost.
    heartbeat_s: float = Field(5.0, gt=0, le=600)
    lost_after_s: float = Field(60.0, gt=0, le=24 * 3600)
    # what one task needs (GPUs, CPUs, memory): Dask resources, Ray options, job variables
    resources: Resources | None = None

    def task_seconds(self) -> float:
        """Work per task: ``min_task_seconds``, else a default from Prefect's measured per-task
        cost (bench/overhead.py --sweep, docs/benchmarks.md): ~170 ms per process, Dask or Ray
        task (context rehydration in the worker) -> 20 s, ~1 %; ~35 ms per thread task -> 1 s
        (~3.5 %: longer tasks lengthened the demo's tail, 2 s ran slower there)."""
        if self.min_task_seconds is not None:
            return self.min_task_seconds
        return THREAD_TASK_SECONDS if self.kind == "threads" else PROCESS_TASK_SECONDS

    def inflight_tasks(self) -> int | None:
        """Tasks this runner keeps in flight (None: unbounded, each shard submitted when planned)."""
        if self.inflight is not None and self.kind != "deployment":
            return self.inflight
        if self.kind == "deployment" or self.address:
            return None
        return self.max_workers if self.kind == "threads" else 2 * self.max_workers

    @model_validator(mode="after")
    def _deployment(self) -> RunnerConfig:
        if self.kind == "deployment" and not self.deployment:
            raise ValueError("kind 'deployment' needs 'deployment: <flow>/<deployment>'")
        if self.kind == "ray":
            import importlib.util

            if importlib.util.find_spec("prefect_ray") is None:  # optional extra
                raise ValueError("kind 'ray' needs prefect-ray: pip install 'forenset[ray]'")
        return self


ExportConfig = ExportSettings


class BuildSettings(Strict):
    """The build-wide fields; each stage adds its own section (``BuildConfig``)."""

    seed: int = 0  # every stage's fingerprint covers it
    run_dir: str = operational("runs/demo")
    # how to reach an object-store run_dir (endpoint, region, profile...; no secrets)
    storage: StorageConfig = operational(StorageConfig())
    # decides which sources shards exist; each shard's params list its items
    shard_size: int = operational(256, ge=1, le=1_000_000)
    export: ExportConfig = ExportConfig()
    # where shard tasks run, keyed by stage name or "default"
    runners: dict[str, RunnerConfig] = operational({"default": RunnerConfig()})
    # keep freed image buffers in the worker's heap instead of mmap/munmap per op (glibc
    # mallopt; forenset/runtime.py): fewer page faults, better scaling across worker processes
    tune_allocator: bool = operational(True)

    @model_validator(mode="after")
    def _runner_keys(self) -> BuildSettings:
        names = {c.name for c in stage_classes()}
        unknown = sorted(set(self.runners) - names - {"default"})
        if unknown:
            raise ValueError(
                f"runners key(s) {', '.join(unknown)} name no stage "
                f"(use 'default' or one of: {', '.join(sorted(names))})"
            )
        return self

    def runner_for(self, stage: str) -> RunnerConfig:
        return self.runners.get(stage) or self.runners.get("default") or RunnerConfig()

    def resolved(self) -> dict[str, Any]:
        """The fully defaulted config as plain data (what is saved and hashed)."""
        return self.model_dump(mode="json")

    def config_hash(self) -> str:
        doc = json.dumps(self.resolved(), sort_keys=True)
        return hashlib.blake2b(doc.encode(), digest_size=12).hexdigest()


def _stage_sections() -> dict[str, Any]:
    """One field per stage with a config model: (type, default), keyed by its section name."""
    fields: dict[str, Any] = {}
    for cls in stage_classes():
        if cls.config_model is None:
            continue
        key = cls.config_section()
        if key in fields or key in BuildSettings.model_fields:
            raise TypeError(f"stage {cls.name}'s config section '{key}' is already taken")
        default = cls.config_default
        if default is None and isinstance(cls.config_model, type):
            default = cls.config_model()
        fields[key] = (cls.config_model, Field(default=default))
    return fields


def assemble() -> type[BuildSettings]:
    """The build config model of the stages registered now (built-ins and installed plugins)."""
    return create_model(
        "BuildConfig", __base__=BuildSettings, __module__=__name__, **_stage_sections()
    )


def section(cfg: BuildSettings, owner: type[Stage[T]]) -> T:
    """``owner``'s section of a build config, typed by the stage's config type (what
    ``Stage.cfg`` is inside the stage): code above the stages reads sections through it
    (``section(cfg, Splits).fractions``), not by attribute of the assembled class."""
    return cast(T, getattr(cfg, owner.config_section()))


if TYPE_CHECKING:
    # To the type checker the assembled class is its base: the stage sections are typed where
    # they are read, by each stage's config type (``Stage[C].cfg``, ``Stage.config_of``).
    BuildConfig = BuildSettings
else:
    BuildConfig = assemble()


def _loc(err: Mapping[str, Any]) -> str:
    return ".".join(str(p) for p in err.get("loc", ()) if not str(p).startswith("function-"))


def _fields_at(model: Any, loc: tuple[Any, ...]) -> list[str]:
    """The field names of the pydantic model(s) that may hold the key at ``loc`` (empty where
    the path leaves models)."""
    import typing

    from pydantic import BaseModel

    def models_in(tp: Any) -> list[type[BaseModel]]:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return [tp]
        return [m for a in typing.get_args(tp) for m in models_in(a)]

    current: list[type[BaseModel]] = [model] if isinstance(model, type) else []
    for part in loc[:-1]:
        if isinstance(part, int) or str(part).startswith("function-"):
            continue  # a list index (the element's model was taken with the list's type)
        nxt: list[type[BaseModel]] = []
        for m in current:
            f = m.model_fields.get(str(part))
            if f is not None:
                nxt += models_in(f.annotation)
        if not nxt:
            # a mapping's key (``runners.default``) or a tagged union's tag (the member
            # class's name): the value's models are the ones the walk already holds
            nxt = [m for m in current if m.__name__ == str(part)] or current
        current = nxt
    return sorted({name for m in current for name in m.model_fields})


def did_you_mean(word: str, choices: list[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` (difflib), else ''."""
    import difflib

    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def format_validation_error(exc: ValidationError, source: str, model: Any = None) -> str:
    """One sentence naming the offending key (the first error; the count of others); for an
    unknown key, the closest field name of the model that holds it."""
    errs = exc.errors()
    e = errs[0]
    key = _loc(e) or "(top level)"
    if e.get("type") == "extra_forbidden":
        loc = tuple(e.get("loc", ()))
        hint = did_you_mean(str(loc[-1]), _fields_at(model, loc)) if loc and model else ""
        msg = f"unknown key '{key}'{hint}"
    else:
        text = str(e.get("msg", "invalid value")).removeprefix("Value error, ")
        msg = f"bad value for '{key}': {text}"
    more = (
        f" (and {len(errs) - 1} more problem{'s' if len(errs) > 2 else ''})"
        if len(errs) > 1
        else ""
    )
    return f"Invalid config {source}: {msg}{more}."


# What one config may cost to load. PyYAML's safe loader (pure Python: libyaml's composer
# overflows the C stack on deep nesting) reads ~0.3 MB/s on a quiet 2-core machine, and every
# value becomes a validated pydantic field that the build hashes, saves and sends: 256 KiB and
# 100,000 values (aliases counted as the copies they stand for) bound both time and memory;
# the largest example config is 4.6 KB. Long lists (photos, prompts) belong in files that
# sources read, not in the config.
CONFIG_MAX_BYTES = 256 * 1024
CONFIG_MAX_NODES = 100_000
CONFIG_MAX_DEPTH = 64


def load_config(
    path: str | Path | None = None, overrides: dict[str, Any] | None = None
) -> BuildConfig:
    """Load YAML (the demo config when ``path`` is None) and validate it. A section whose
    model has ``input_problem()`` (a local input that is missing, say) is asked too, so the
    CLI answers at once instead of when the stage runs (``validate_config`` does not ask: a
    config built in code may name inputs made later)."""
    from forenset.paths import read_text_file
    from forenset.strict import YAMLTooLarge, load_yaml

    p = Path(path) if path else DEFAULT_CONFIG
    if not p.exists():
        raise ConfigError(f"Config file {p} does not exist.")
    try:
        text = read_text_file(p, CONFIG_MAX_BYTES)  # a regular UTF-8 file, capped
    except OSError as e:
        raise ConfigError(f"Config file {p} cannot be read: {e.strerror or e}.") from None
    try:
        # a repeated key is an error, not "the last one wins"; aliases count as copies
        data = load_yaml(text, max_nodes=CONFIG_MAX_NODES, max_depth=CONFIG_MAX_DEPTH) or {}
    except YAMLTooLarge as e:
        raise ConfigError(f"Config file {p} is too large to load: {e}.") from None
    except yaml.YAMLError as e:
        raise ConfigError(
            f"Config file {p} is not valid YAML ({str(e).splitlines()[0]})."
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"Config file {p} must hold a mapping at the top level.")
    data.update(overrides or {})
    cfg = validate_config(data, str(p))
    for name in type(cfg).model_fields:  # inputs a build would miss minutes later: now
        check = getattr(getattr(cfg, name), "input_problem", None)
        problem = check() if callable(check) else None
        if problem:
            raise ConfigError(f"Invalid config {p}: {name}: {problem}.")
    return cfg


def validate_config(data: dict[str, Any], source: str = "<dict>") -> BuildConfig:
    found = find_userinfo(data)  # at any depth (a stage's free-form options too)
    if found:
        raise ConfigError(f"Invalid config {source}: {userinfo_problem(*found)}.")
    try:
        return BuildConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, source, BuildConfig)) from None
