"""Build configuration: YAML validated by pydantic. Unknown keys are errors, named in one sentence."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from forenset.backends.image.api_config import GeminiImagesConfig, OpenAIImagesConfig
from forenset.backends.image.diffusers_config import DiffusersConfig
from forenset.backends.llm.types import LLMSettings
from forenset.exports.settings import ExportSettings
from forenset.perturbations.config import PerturbationConfig

DEFAULT_CONFIG = Path(__file__).resolve().parent / "data" / "demo.yaml"


class ConfigError(ValueError):
    """A user-facing configuration problem; its message is one sentence."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


THREAD_TASK_SECONDS = 1.0  # default min_task_seconds of a thread runner
PROCESS_TASK_SECONDS = 20.0  # ... of a process, Dask or Ray runner


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


class SourcesConfig(Strict):
    samples: Literal["all", "none"] | list[str] = "all"
    folders: list[str] = []
    csv: list[str] = []  # CSV with columns path[,caption,license]
    extensions: list[str] = [".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".bmp", ".gif"]
    max_side: int = Field(512, ge=16, le=8192)  # normalised images are capped to this side
    max_pixels: int = Field(40_000_000, ge=1024)  # larger headers are refused (decompression bombs)
    max_file_mb: float = Field(64, gt=0)


class ModelStageConfig(Strict):
    """Shared by every model-using stage. ``llm: None`` keeps the offline algorithm (the demo).

    ``llm`` set: one chat request per item through ``forenset.backends.llm.run_chat``; replies
    failing the stage's validators are regenerated up to ``max_attempts`` times. Templates are
    read from ``prompts_dir`` (default: the packaged forenset/prompts); their content hash, not
    the folder name, goes into the fingerprint.
    """

    backend: Literal["offline"] = "offline"
    llm: LLMSettings | None = None
    max_attempts: int = Field(3, ge=1, le=10)
    prompts_dir: str | None = None


class CaptionsConfig(ModelStageConfig):
    keep_manifest: bool = (
        True  # captions shipped with the source are kept (caption_source='manifest')
    )
    min_words: int = Field(25, ge=1)  # model captions: validate_caption bounds
    max_words: int = Field(160, ge=1)


class InstructionsConfig(ModelStageConfig):
    """Edit sets per image. ``kinds`` are kind weights: a kind missing or 0 is never asked for,
    so by default only what the offline editor executes is generated (also by an LLM)."""

    min_edits: int = Field(2, ge=1, le=8)
    max_edits: int = Field(3, ge=1, le=8)
    kinds: dict[str, float] = {
        "copy_move": 1.0,
        "removal": 1.0,
        "recolor": 1.0,
        "local_warp": 1.0,
        "liquify": 1.0,
        "splice": 1.0,
        "lighting": 1.0,
    }
    family_weights: dict[str, float] = {"object": 0.4, "geometry": 0.2, "scene": 0.2, "person": 0.2}
    rate_difficulty_with_llm: bool = True  # LLM path: instruction_difficulty template

    @model_validator(mode="after")
    def _range(self) -> InstructionsConfig:
        if self.min_edits > self.max_edits:
            raise ValueError("min_edits must not exceed max_edits")
        return self


class FaultRates(Strict):
    """Faulty-generator mode: the share of edits that fail in a known way (ground truth kept)."""

    missing: float = Field(0.0, ge=0, le=1)
    partial: float = Field(0.0, ge=0, le=1)
    offtarget: float = Field(0.0, ge=0, le=1)
    artifacts: float = Field(0.0, ge=0, le=1)

    @model_validator(mode="after")
    def _sum(self) -> FaultRates:
        if self.missing + self.partial + self.offtarget + self.artifacts > 1.0 + 1e-9:
            raise ValueError("fault rates must sum to at most 1")
        return self


class GeneratorConfig(Strict):
    """One generator of the pool. ``family`` groups generators for held-out test splits."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")
    backend: Literal["offline", "diffusers", "openai", "gemini"] = "offline"
    family: str = "classical"
    model: str = "opencv"
    # offline (classical manipulations)
    inpaint: Literal["telea", "ns"] = "telea"
    blend: Literal["feather", "poisson"] = "feather"
    strength: float = Field(1.0, gt=0, le=3)
    faults: FaultRates = FaultRates()
    # diffusers: the pipeline config (its class decides text-to-image vs editing)
    diffusers: DiffusersConfig | None = None
    # image APIs (gpt-image, Gemini image output); keys come from the env var they name
    openai: OpenAIImagesConfig | None = None
    gemini: GeminiImagesConfig | None = None
    t2i_size: tuple[int, int] = (512, 512)  # (width, height) of text-to-image candidates

    @model_validator(mode="after")
    def _backend_config(self) -> GeneratorConfig:
        if self.backend == "diffusers" and self.diffusers is None:
            raise ValueError(
                "backend 'diffusers' needs a 'diffusers:' block (pipeline, model or tiny)"
            )
        if self.backend == "offline" and self.diffusers is not None:
            raise ValueError("a 'diffusers:' block needs backend: diffusers")
        return self

    def tasks(self) -> set[str]:
        """What this generator can do: 'edit' (photos + instructions) and/or 't2i' (prompts)."""
        if self.backend == "offline":
            return {"edit"}
        if self.backend in ("openai", "gemini"):
            return {"edit", "t2i"}
        from forenset.backends.image.registry import pipeline_spec

        return {pipeline_spec(self.diffusers.pipeline).task}  # type: ignore[union-attr]

    def fingerprint(self) -> dict[str, Any]:
        """What shapes this generator's pixels (not operational knobs such as batch size)."""
        d = self.model_dump(mode="json")
        ops = {
            "rpm",
            "max_concurrency",
            "timeout_s",
            "max_retries",
            "backoff_base_s",
            "backoff_max_s",
            "api_key_env",
            "price_per_image",
        }
        for api in ("openai", "gemini"):
            if d.get(api):
                d[api] = {k: v for k, v in d[api].items() if k not in ops}
        if self.diffusers is not None:
            d["diffusers"] = {
                k: v
                for k, v in d["diffusers"].items()
                if k not in ("batch_size", "device", "cpu_offload")
            }
        return d


class DiffsConfig(ModelStageConfig):
    threshold: float = Field(0.08, gt=0, lt=1)  # per-pixel |Δ| (0..1) counted as a change
    min_region_frac: float = Field(0.0015, ge=0, lt=1)  # smaller connected regions are noise
    max_regions: int = Field(8, ge=1, le=64)


class JudgmentsConfig(ModelStageConfig):
    """The judge(s). The offline rule judge's evidence thresholds are its 'prompt'.

    With ``llm`` set, ``panel: false`` gives each candidate one judge drawn from the pool by
    weight; ``panel: true`` asks every pool model (one raw row per candidate per judge), and
    ``with_rule_judge`` adds the offline rule judge's row next to the model judges'.
    """

    offtarget_dominance: float = Field(1.0, gt=0)  # off/in ratio above which off-target dominates
    max_offtarget_frac: float = Field(0.06, ge=0, le=1)
    panel: bool = False
    with_rule_judge: bool = False


class VerdictsConfig(Strict):
    """The versioned aggregation rule: judges' raw records -> one verdict per candidate.

    Changing a threshold here re-runs verdicts and what follows, never a judge call.
    """

    rule_version: str = "agg-v1"
    combine: Literal["mean", "min", "max"] = "mean"
    keep_score: float = Field(0.6, ge=0, le=1)
    borderline_score: float = Field(0.35, ge=0, le=1)
    hard_discard: list[str] = ["off_target", "severe_artifacts"]  # any judge saying so discards
    borderline_policy: Literal["keep", "drop", "review"] = "drop"

    @model_validator(mode="after")
    def _order(self) -> VerdictsConfig:
        if self.borderline_score > self.keep_score:
            raise ValueError("borderline_score must not exceed keep_score")
        return self


class SplitsConfig(Strict):
    fractions: dict[Literal["train", "validation", "test"], float] = {
        "train": 0.6,
        "validation": 0.2,
        "test": 0.2,
    }
    holdout_families: list[str] = []  # generator families seen only in test
    include_reals: bool = True

    @field_validator("fractions")
    @classmethod
    def _fractions(cls, v: dict[str, float]) -> dict[str, float]:
        if abs(sum(v.values()) - 1.0) > 1e-6 or any(x < 0 for x in v.values()):
            raise ValueError("split fractions must be non-negative and sum to 1")
        return v


class PerturbationsStageConfig(PerturbationConfig):
    """The catalogue's own config (schedules, severity bands, adversarial) + variants per sample."""

    variants: int = Field(1, ge=0, le=16)  # perturbed copies per sample


class ExplanationsConfig(ModelStageConfig):
    min_words: int = Field(12, ge=1)
    max_words: dict[str, int] = {"complex": 160, "simple": 45, "authenticity": 140}


class ScenariosConfig(Strict):
    """SafeIMG scenario instances, one shard per taxonomy category (12 by default)."""

    enabled: bool = True
    per_category: int = Field(12, ge=1, le=10_000)
    categories: list[str] | None = None  # None: all of taxonomy.yaml
    llm: LLMSettings | None = None  # scenario_expansion template; None: sample_scenarios
    max_attempts: int = Field(3, ge=1, le=10)
    prompts_dir: str | None = None


class PromptsConfig(Strict):
    """5W+1H text-to-image prompts, one per scenario, near-duplicates removed per category."""

    dedupe_threshold: float = Field(0.6, gt=0, le=1)
    llm: LLMSettings | None = None  # prompt_5w1h template; None: the offline constructor
    max_attempts: int = Field(5, ge=1, le=10)
    prompts_dir: str | None = None


ExportConfig = ExportSettings


class BuildConfig(Strict):
    seed: int = 0
    run_dir: str = "runs/demo"
    shard_size: int = Field(256, ge=1, le=1_000_000)
    sources: SourcesConfig = SourcesConfig()
    captions: CaptionsConfig = CaptionsConfig()
    instructions: InstructionsConfig = InstructionsConfig()
    generators: list[GeneratorConfig] = [GeneratorConfig(name="cv-telea")]
    diffs: DiffsConfig = DiffsConfig()
    judgments: JudgmentsConfig = JudgmentsConfig()
    verdicts: VerdictsConfig = VerdictsConfig()
    splits: SplitsConfig = SplitsConfig()
    perturbations: PerturbationsStageConfig = PerturbationsStageConfig()
    explanations: ExplanationsConfig = ExplanationsConfig()
    scenarios: ScenariosConfig = ScenariosConfig()
    prompts: PromptsConfig = PromptsConfig()
    export: ExportConfig = ExportConfig()
    runners: dict[str, RunnerConfig] = {"default": RunnerConfig()}
    # keep freed image buffers in the worker's heap instead of mmap/munmap per op (glibc
    # mallopt; forenset/runtime.py): fewer page faults, better scaling across worker processes
    tune_allocator: bool = True

    @model_validator(mode="after")
    def _unique_generators(self) -> BuildConfig:
        names = [g.name for g in self.generators]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"generator names must be unique (repeated: {', '.join(sorted(dup))})")
        return self

    def runner_for(self, stage: str) -> RunnerConfig:
        return self.runners.get(stage) or self.runners.get("default") or RunnerConfig()

    def resolved(self) -> dict[str, Any]:
        """The fully defaulted config as plain data (what is saved and hashed)."""
        return self.model_dump(mode="json")

    def config_hash(self) -> str:
        doc = json.dumps(self.resolved(), sort_keys=True)
        return hashlib.blake2b(doc.encode(), digest_size=12).hexdigest()


def _loc(err: dict[str, Any]) -> str:
    return ".".join(str(p) for p in err.get("loc", ()) if not str(p).startswith("function-"))


def format_validation_error(exc: ValidationError, source: str) -> str:
    """One sentence naming the offending key (the first error; the count of others)."""
    errs = exc.errors()
    e = errs[0]
    key = _loc(e) or "(top level)"
    if e.get("type") == "extra_forbidden":
        msg = f"unknown key '{key}'"
    else:
        text = str(e.get("msg", "invalid value")).removeprefix("Value error, ")
        msg = f"bad value for '{key}': {text}"
    more = (
        f" (and {len(errs) - 1} more problem{'s' if len(errs) > 2 else ''})"
        if len(errs) > 1
        else ""
    )
    return f"Invalid config {source}: {msg}{more}."


def load_config(
    path: str | Path | None = None, overrides: dict[str, Any] | None = None
) -> BuildConfig:
    """Load YAML (the demo config when ``path`` is None) and validate it."""
    p = Path(path) if path else DEFAULT_CONFIG
    if not p.exists():
        raise ConfigError(f"Config file {p} does not exist.")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(
            f"Config file {p} is not valid YAML ({str(e).splitlines()[0]})."
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"Config file {p} must hold a mapping at the top level.")
    data.update(overrides or {})
    return validate_config(data, str(p))


def validate_config(data: dict[str, Any], source: str = "<dict>") -> BuildConfig:
    try:
        return BuildConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, source)) from None
