"""The one registry of stages and tables, in topological order.

Everything that needs to know which stages exist (the scheduler, the config, the store's views,
exports, the report, the CLI) asks this module. It names each stage's class by import path and
loads it on demand, so readers that only need table names (``forenset query``) import no stage
code. Third-party packages add stages through the ``forenset.stages`` entry-point group
(``name = "package.module:StageClass"``), as simonw/llm's plugins add models; a plugin stage
is placed after the stages it reads.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from forenset.errors import ForensetError
from forenset.plugins import entry_points_by_name

# A stage class (``forenset.tasks.base.Stage``): the registry sits below the stages' layer and
# names their classes by import path, so it does not import the base class either.
Stage = Any

ENTRY_POINT_GROUP = "forenset.stages"

# Built-in stages in topological order (every stage after the stages it reads).
BUILTIN: dict[str, str] = {
    "sources": "forenset.tasks.sources:Sources",
    "captions": "forenset.tasks.captions:Captions",
    "instructions": "forenset.tasks.instructions:Instructions",
    "scenarios": "forenset.tasks.scenarios:Scenarios",
    "prompts": "forenset.tasks.prompts:Prompts",
    "candidates": "forenset.tasks.candidates:Candidates",
    "diffs": "forenset.tasks.diffs:Diffs",
    "judgments": "forenset.tasks.judgments:Judgments",
    "verdicts": "forenset.tasks.verdicts:Verdicts",
    "splits": "forenset.tasks.splits:Splits",
    "perturbations": "forenset.tasks.perturb:Perturbations",
    "explanations": "forenset.tasks.explain:Explanations",
    # benchmarks (opt-in from config)
    "eval_sets": "forenset.benchmarks.evaluation.stages.eval_sets:EvalSets",
    "detections": "forenset.benchmarks.evaluation.stages.detections:Detections",
    "eval_scores": "forenset.benchmarks.evaluation.stages.eval_scores:EvalScores",
    "reward_images": "forenset.benchmarks.reward.stages.reward_images:RewardImages",
    "reward_responses": "forenset.benchmarks.reward.stages.reward_responses:RewardResponses",
    "reward_triplets": "forenset.benchmarks.reward.stages.reward_triplets:RewardTriplets",
    "reward_judgments": "forenset.benchmarks.reward.stages.reward_judgments:RewardJudgments",
    "reward_labels": "forenset.benchmarks.reward.stages.reward_labels:RewardLabels",
    "reward_scores": "forenset.benchmarks.reward.stages.reward_scores:RewardScores",
    "fakebench_items": "forenset.benchmarks.fakebench.stages.fakebench_items:FakeBenchItems",
    "fakebench_answers": "forenset.benchmarks.fakebench.stages.fakebench_answers:FakeBenchAnswers",
    "fakebench_scores": "forenset.benchmarks.fakebench.stages.fakebench_scores:FakeBenchScores",
    "public_items": "forenset.benchmarks.public.stages.public_items:PublicItems",
    "public_answers": "forenset.benchmarks.public.stages.public_answers:PublicAnswers",
    "public_scores": "forenset.benchmarks.public.stages.public_scores:PublicScores",
}

# Tables that no stage writes (``forenset import-annotations`` writes ``annotations``,
# ``forenset import-gold`` writes ``gold_references``).
NON_STAGE_TABLES: tuple[str, ...] = ("annotations", "gold_references")


class RegistryError(ForensetError, RuntimeError):
    """The stage registry is inconsistent (a cycle, an unknown input, a clashing plugin)."""


def _plugins() -> dict[str, str]:
    """``forenset.stages`` entry points of installed distributions: name -> "module:Class"
    (scanned once per ``sys.path``: ``forenset.plugins``)."""
    found: dict[str, str] = {}
    for name, eps in entry_points_by_name(ENTRY_POINT_GROUP).items():
        for ep in eps:
            if name in BUILTIN:
                raise RegistryError(f"plugin stage '{name}' ({ep.value}) clashes with a built-in")
            found[name] = ep.value
    return found


def targets() -> dict[str, str]:
    """Every registered stage (built-ins, then plugins): name -> "module:Class"."""
    return {**BUILTIN, **_plugins()}


def stage_names() -> list[str]:
    """Stage names in topological order, without importing stage code when no plugin is
    installed (plugins need their classes loaded to be placed)."""
    t = targets()
    if len(t) == len(BUILTIN):
        return list(BUILTIN)
    return [c.name for c in stage_classes()]


def is_benchmark_stage(name: str) -> bool:
    """Whether ``name`` belongs to a benchmark family (opt-in from config), by its import path:
    no stage code is imported."""
    return targets().get(name, "").startswith("forenset.benchmarks.")


def fold_idle(
    names: list[str], idle: set[str], complete: bool = True
) -> tuple[list[str], list[str]]:
    """The stages to show as rows (``names`` less the idle ones) and one line per group of
    idle stages (no shards planned, none committed): "12 benchmark stages not enabled" for the
    opt-in ones, the others by name ("no shards planned: scenarios, prompts": a stage with
    no input in this config, or one an incomplete build has not reached). ``complete``: the
    build ran to its end, so an idle benchmark stage is one the config does not enable."""
    bench = [n for n in names if n in idle and is_benchmark_stage(n)]
    other = [n for n in names if n in idle and n not in bench]
    lines = []
    if bench:
        n = f"{len(bench)} benchmark stage{'s' if len(bench) > 1 else ''}"
        lines.append(f"{n} not enabled" if complete else f"{n} not enabled or not reached yet")
    if other:
        lines.append(f"no shards planned: {', '.join(other)}")
    return [n for n in names if n not in idle], lines


def table_names() -> list[str]:
    """Every table a run can hold: the stages in DAG order, then the non-stage tables."""
    return [*stage_names(), *NON_STAGE_TABLES]


def load_target(target: str) -> type:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@cache
def _load(name: str, target: str) -> type[Stage]:
    cls = load_target(target)
    if getattr(cls, "name", None) != name:
        raise RegistryError(f"stage '{name}' ({target}) has name {getattr(cls, 'name', None)!r}")
    return cls


def stage_class(name: str) -> type[Stage]:
    """The class of one registered stage (imports its module)."""
    t = targets()
    if name not in t:
        raise KeyError(f"unknown stage '{name}' (known: {', '.join(t)})")
    return _load(name, t[name])


def stage_classes() -> list[type[Stage]]:
    """Every registered stage class, in topological order (built-ins first, each plugin after
    the stages it reads). Raises ``RegistryError`` on an unknown input or a cycle."""
    classes = {n: _load(n, t) for n, t in targets().items()}
    return topological(list(classes.values()))


def gate_names() -> list[str]:
    """The gates (stages that keep or discard candidates, ``Stage.gate``) in chain order: each
    gate after the first reads the one before it, and splits reads the last, so a new gate is
    inserted between verdicts and splits by registering it, without editing splits. Imports
    every stage module; raises ``RegistryError`` when the gates do not form one chain."""
    return list(_gate_chain(tuple(targets().items())))


def final_gate() -> str:
    """The gate whose kept candidates reach splits (``verdicts`` unless another gate follows)."""
    chain = gate_names()
    if not chain:
        raise RegistryError("no registered stage is a gate (Stage.gate), so splits has no input")
    return chain[-1]


@cache
def _gate_chain(items: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    gates = {n: c for n, t in items if getattr(c := _load(n, t), "gate", False)}
    read = {up for c in gates.values() for up in c.inputs if up in gates}
    last = [n for n in gates if n not in read]
    if len(last) > 1:
        raise RegistryError(
            f"gates {', '.join(last)} are each last: a gate reads the one before it"
        )
    chain = last[:1]
    while chain:
        before = [up for up in gates[chain[-1]].inputs if up in gates]
        if not before:
            break
        if len(before) > 1 or before[0] in chain:
            raise RegistryError(
                f"gate '{chain[-1]}' reads several gates or a later one ({', '.join(before)})"
            )
        chain.append(before[0])
    if len(chain) != len(gates):
        raise RegistryError(f"gates {', '.join(sorted(gates))} do not form one chain")
    return tuple(reversed(chain))


def topological(classes: list[type[Stage]]) -> list[type[Stage]]:
    """A stable topological order: each class as early as its inputs allow, ties in list order."""
    by_name = {c.name: c for c in classes}
    for c in classes:
        missing = [up for up in c.inputs if up not in by_name]
        if missing:
            raise RegistryError(f"stage '{c.name}' reads unknown stage(s) {', '.join(missing)}")
    out: list[type[Stage]] = []
    placed: set[str] = set()
    pending = list(classes)
    while pending:
        ready = next((c for c in pending if set(c.inputs) <= placed), None)
        if ready is None:
            raise RegistryError(f"stage cycle among {', '.join(c.name for c in pending)}")
        out.append(ready)
        placed.add(ready.name)
        pending.remove(ready)
    return out
