"""The worker side of the scheduler: run shards in this process, outside any orchestrator.

Read the declared input columns, process, check the partition contract, commit atomically.
Prefect tasks, deployment flow runs and the bare thread pool all call ``run_shards``."""

from __future__ import annotations

import threading
import time
from typing import Any

from forenset.config import BuildConfig
from forenset.errors import ConfigurationError
from forenset.redact import install_log_redaction, redact_table, remember_config
from forenset.runtime import tune_allocator
from forenset.store.run_store import LockLostError, RunStore, ShardInfo
from forenset.store.storage import StorageError, use_storage
from forenset.tasks.base import ContractError, ShardSpec, Stage, StageContext

_CTX: dict[tuple[str, str], StageContext] = {}
_LOCK = threading.Lock()


def context_for(run_uri: str, config: BuildConfig | dict[str, Any] | str) -> StageContext:
    """One context (store + config) per process and config, reused across shards.

    ``config`` may be a config *hash*: shard tasks carry only that, and a worker that has not
    seen it yet reads ``config.yaml`` from the run directory (the build writes it before any
    shard runs). Prefect walks every task parameter several times per task, so a 4 KB config
    dict per task cost ~8 ms of CPU each (``docs/benchmarks.md``)."""
    if isinstance(config, str):
        with _LOCK:
            if (run_uri, config) in _CTX:
                return _CTX[(run_uri, config)]
        cfg = _config_from_run_dir(run_uri, config)
    else:
        cfg = config if isinstance(config, BuildConfig) else BuildConfig.model_validate(config)
        use_storage(cfg.storage)  # inherited by the worker processes this process starts
    key = (run_uri, cfg.config_hash())
    with _LOCK:
        if key not in _CTX:
            _CTX[key] = StageContext(RunStore(run_uri, cfg.storage), cfg)
        return _CTX[key]


def _config_from_run_dir(run_uri: str, config_hash: str) -> BuildConfig:
    import yaml

    store = RunStore(run_uri)
    if not store.exists("config.yaml"):
        raise RuntimeError(f"{run_uri} has no config.yaml: shard tasks need the build's config")
    cfg = BuildConfig.model_validate(yaml.safe_load(store.read_bytes("config.yaml")))
    if cfg.config_hash() != config_hash:
        raise RuntimeError(
            f"config.yaml in {run_uri} has hash {cfg.config_hash()}, but this shard belongs to a "
            f"build with config {config_hash}: another build changed the run directory"
        )
    return cfg


_GUARDED: set[int] = set()


def _guard_secrets(config: Any) -> None:
    """Once per config in this worker: remember the values of the env vars the config names
    (``*_env``) and redact every log record, so no secret lands in rows, caches or logs."""
    if id(config) in _GUARDED:
        return
    remember_config(config)
    install_log_redaction()
    _GUARDED.add(id(config))


def execute_shard(stage: Stage, spec: ShardSpec, fence: str | None = None) -> ShardInfo:
    if stage.ctx.config.tune_allocator:  # once per worker process; see forenset/runtime.py
        tune_allocator()
    _guard_secrets(stage.ctx.config)
    t0 = time.perf_counter()
    batch = stage.read_inputs(spec)
    out = redact_table(stage.process(batch, spec))  # no secret lands in a row (forenset.redact)
    stage.check_partition(spec, out)
    counts = stage.footer_counts(out, spec)
    counts["ms"] = int((time.perf_counter() - t0) * 1000)
    return stage.ctx.store.write_shard(
        stage.name,
        spec.shard_id,
        out,
        fingerprint=spec.fingerprint,
        partition=spec.partition,
        counts=counts,
        inputs=spec.input_ids(),
        content_columns=(stage.key, "status", "error"),
        fence=fence,  # the build's lock token: a build that lost its lock commits nothing
    )


def run_shards(
    stage: Stage, specs: list[ShardSpec], fence: str | None = None
) -> list[dict[str, Any]]:
    """Run a bundle of shards of one stage in this worker, one after another.

    Each shard commits on its own, so resume granularity stays the shard. One outcome per spec,
    in order: ``{"info": <ShardInfo JSON>}`` or ``{"error": "<Type>: <message>"}``; a failing
    shard is reported and the rest of the bundle still runs. A ``ConfigurationError`` or a
    broken contract would fail every shard alike: it is marked ``fatal`` (the scheduler stops
    the build with its sentence) and the rest of the bundle is not tried; so are a lost lock
    (``LockLostError``: another build took the run over, ``fence`` is the token of ours) and a
    store that does not answer (``StorageError``: every shard would wait on it alike)."""
    out: list[dict[str, Any]] = []
    for spec in specs:
        try:
            out.append({"info": execute_shard(stage, spec, fence).to_json()})
        except (ConfigurationError, ContractError, LockLostError, StorageError) as e:
            err = {"error": repr(e) if isinstance(e, ContractError) else str(e), "fatal": True}
            return out + [err] * (len(specs) - len(out))
        except Exception as e:  # noqa: BLE001 - reported per shard by the scheduler
            out.append({"error": f"{type(e).__name__}: {e}"})
    return out
