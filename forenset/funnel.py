"""A build's funnel: how many rows survived each step, and why the rest were dropped.

sources → instructions → candidates per generator → kept by the gates (per generator and edit
kind, the discarded ones by reason) → splits (per split, in-distribution / held-out; rows left
out and why) → perturbed → explained. Read from the stage manifests' footer counts only (no
data scan), so ``forenset status --funnel``, the HTML report and the dataset card show the
same numbers: they all call ``funnel``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import yaml

from forenset.families import families as registered_families
from forenset.store.run_store import RunStore, ShardInfo

SPLITS = ("train", "validation", "test")
DEFAULT_MIN_N = 10  # intervals.min_n's default (benchmarks.common.scoring.intervals)


@dataclass
class Step:
    """One line of the funnel: ``n`` rows of ``group`` at ``step`` (``group`` "" = all);
    ``of``: the rows that step started from, when it narrows them; ``why``: what it dropped."""

    step: str
    group: str
    n: int
    of: int | None = None
    why: dict[str, int] = field(default_factory=dict)

    def why_text(self) -> str:
        return ", ".join(
            f"{k} {v}" for k, v in sorted(self.why.items(), key=lambda x: (-x[1], x[0]))
        )


@dataclass
class Funnel:
    steps: list[Step]
    warnings: list[str]  # identical generators, a held-out family too small to measure

    def numbers(self) -> list[tuple[str, str, int, int | None, str]]:
        """Every figure, as the three views print them (a test compares them)."""
        return [(s.step, s.group, s.n, s.of, s.why_text()) for s in self.steps]


def _sum(shards: list[ShardInfo], key: str) -> int:
    return sum(s.counts.get(key, 0) for s in shards)


def _prefixed(shards: list[ShardInfo], prefix: str) -> Counter[tuple[str, ...]]:
    """Footer counts whose key starts with ``prefix/``, by the rest of the key's parts."""
    out: Counter[tuple[str, ...]] = Counter()
    for s in shards:
        for k, v in s.counts.items():
            if k.startswith(prefix + "/"):
                out[tuple(k.split("/")[1:])] += v
    return out


def build_config(store: RunStore) -> dict[str, Any]:
    """The run's saved config (``config.yaml``) as a mapping; {} when absent or unreadable."""
    try:
        doc = yaml.safe_load(store.read_bytes("config.yaml").decode("utf-8"))
    except (FileNotFoundError, OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return doc if isinstance(doc, dict) else {}


def funnel(store: RunStore) -> Funnel:
    """The funnel of the build in ``store``, from its manifests' footers."""
    state = store.read_json("state.json", default={}) or {}
    gates = state.get("gates") or ["verdicts"]
    m = {name: store.manifest(name) for name in ("sources", "instructions", "candidates")}
    steps = [Step("sources", "", _sum(m["sources"], "ok"), why=_errors(m["sources"]))]
    steps.append(Step("instructions", "", _sum(m["instructions"], "ok")))
    steps[-1].why = _errors(m["instructions"])
    cands = [s for s in m["candidates"] if s.partition.get("generator")]
    by_gen: Counter[str] = Counter()
    for s in cands:
        by_gen[s.partition["generator"]] += s.counts.get("ok", 0)
    steps.append(Step("candidates", "", sum(by_gen.values()), why=_errors(cands)))
    steps += [Step("candidates", g, n) for g, n in sorted(by_gen.items())]
    for gate in gates:
        steps += _gate_steps(gate, store.manifest(gate))
    sp = store.manifest("splits")
    steps += _split_steps(sp)
    for stage, label in (("perturbations", "perturbed"), ("explanations", "explained")):
        shards = store.manifest(stage)
        per: Counter[str] = Counter()
        for s in shards:
            per[s.partition.get("split", "")] += s.counts.get("ok", 0)
        steps.append(Step(label, "", sum(per.values()), why=_errors(shards)))
        steps += [Step(label, k, per[k]) for k in SPLITS if k in per]
    return Funnel(steps, identical_warnings(sp) + holdout_warnings(store, sp))


def _errors(shards: list[ShardInfo]) -> dict[str, int]:
    n = _sum(shards, "error")
    return {"error": n} if n else {}


def _gate_steps(gate: str, shards: list[ShardInfo]) -> list[Step]:
    """Kept by the gate: in all, per generator, per generator and edit kind (with reasons)."""
    label = "kept" if gate == "verdicts" else f"kept ({gate})"
    kept = _prefixed(shards, "kept")
    dropped = _prefixed(shards, "discarded")
    rows: dict[tuple[str, str], list[Any]] = {}  # (generator, kind) -> [kept, Counter(reasons)]
    for s in shards:
        g = s.partition.get("generator", "")
        for k, v in s.counts.items():
            parts = k.split("/")
            if parts[0] == "kept" and len(parts) == 2:
                rows.setdefault((g, parts[1]), [0, Counter()])[0] += v
            elif parts[0] == "discarded" and len(parts) == 3:
                rows.setdefault((g, parts[1]), [0, Counter()])[1][parts[2]] += v
    total_kept = _sum(shards, "kept")
    reasons: Counter[str] = Counter()
    for (_, why), v in dropped.items():
        reasons[why] += v
    out = [Step(label, "", total_kept, total_kept + _sum(shards, "discarded"), dict(reasons))]
    if not kept and not dropped:
        return out  # footers of an older build: no per-kind counts
    gens = sorted({g for g, _ in rows})
    for g in gens:
        k = sum(r[0] for (gg, _), r in rows.items() if gg == g)
        lost: Counter[str] = Counter()
        for (gg, _), r in rows.items():
            if gg == g:
                lost.update(r[1])
        out.append(Step(label, g, k, k + sum(lost.values()), dict(lost)))
        for (gg, kind), r in sorted(rows.items()):
            if gg == g:
                out.append(Step(label, f"{g} {kind}", r[0], r[0] + sum(r[1].values()), dict(r[1])))
    return out


def _split_steps(shards: list[ShardInfo]) -> list[Step]:
    n = _prefixed(shards, "n")  # (split, real|id|ood, generator)
    dropped: Counter[str] = Counter()
    for (why, _), v in _prefixed(shards, "dropped").items():
        dropped[why] += v
    ok = _sum(shards, "ok")  # of: the gate's kept fakes and the reals it started from
    out = [Step("splits", "", ok, ok + sum(dropped.values()) if dropped else None, dict(dropped))]
    for sp in SPLITS:
        for part in ("real", "id", "ood"):
            v = sum(c for (s, p, _), c in n.items() if s == sp and p == part)
            if v:
                out.append(Step("splits", f"{sp} {part}", v))
    return out


def identical_warnings(shards: list[ShardInfo]) -> list[str]:
    """One sentence per pair of generators that made identical bytes of the same photo."""
    pairs: dict[tuple[str, str], Counter[str]] = {}
    for (g, other, kind), v in _prefixed(shards, "identical").items():
        pair = (min(g, other), max(g, other))
        per = pairs.setdefault(pair, Counter())
        per[kind] = max(per[kind], v)
    return [
        f"generators {a} and {b} produce identical output for kinds "
        + ", ".join(f"{k} ({v})" for k, v in sorted(kinds.items()))
        for (a, b), kinds in sorted(pairs.items())
    ]


def holdout_counts(
    store: RunStore, shards: list[ShardInfo] | None = None
) -> tuple[list[str], int, int, int]:
    """(held-out families, OOD items in test, test photos, intervals.min_n) of the build."""
    shards = store.manifest("splits") if shards is None else shards
    cfg = build_config(store)  # min_n; the families too for footers written before they were
    found = sorted({k[0] for k in _prefixed(shards, "holdout")})
    families = found or list((cfg.get("splits") or {}).get("holdout_families") or [])
    # the first family section (in the families' order) that sets intervals.min_n
    set_n = [
        ((cfg.get(f.config_section) or {}).get("intervals") or {}).get("min_n")
        for f in registered_families()
        if f.config_section
    ]
    min_n = int(next((n for n in set_n if n), DEFAULT_MIN_N))
    n = _prefixed(shards, "n")
    ood = sum(c for (s, p, _), c in n.items() if s == "test" and p == "ood")
    photos = sum(c for (s, p, _), c in n.items() if s == "test" and p == "real")
    return families, ood, photos, min_n


def holdout_line(families: list[str], ood: int, photos: int, min_n: int) -> str | None:
    """One sentence when the held-out families have fewer than ``min_n`` OOD items in test."""
    if not families or ood >= min_n:
        return None
    fam = f"famil{'y' if len(families) == 1 else 'ies'} {', '.join(families)}"
    return (
        f"held-out {fam}: {ood} OOD item{'' if ood == 1 else 's'} in test, fewer than "
        f"intervals.min_n = {min_n} (the test split holds {photos} source "
        f"photo{'' if photos == 1 else 's'}): OOD figures are anecdotal"
        + ("" if ood else " and the OOD set is empty")
    )


def holdout_warnings(store: RunStore, shards: list[ShardInfo] | None = None) -> list[str]:
    """The ``holdout_line`` of a build that has splits (none before splits ran)."""
    shards = store.manifest("splits") if shards is None else shards
    if not shards:
        return []
    line = holdout_line(*holdout_counts(store, shards))
    return [line] if line else []
