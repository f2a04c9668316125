"""The package's import layers: nothing imports upward, and no module imports itself round.

Every ``import`` / ``from ... import`` in forenset counts, also those inside functions and under
``TYPE_CHECKING`` (a lazy upward import is still an upward dependency). The layers are the map
in docs/design.md; a module belongs to the most specific prefix listed.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import forenset

PKG = Path(forenset.__file__).resolve().parent

# bottom -> top; a module may import its own layer and the layers below it
LAYERS: list[tuple[str, ...]] = [
    (  # pure helpers and data models
        "forenset.errors",
        "forenset.confbase",
        "forenset.schemas",
        "forenset.images",
        "forenset.seeds",
        "forenset.runtime",
        "forenset.text",
        "forenset.perturbations",
        "forenset.readers",
        "forenset.benchmarks.*.schemas",  # each benchmark family's table schemas
        "forenset.benchmarks.fakebench.text",  # FakeBench's vocabulary and answer rules
        "forenset.benchmarks.xdd.format",  # the XDD challenge's files (read by predictions)
        "forenset.paths",
        "forenset.redact",
        "forenset.strict",
        "forenset.plugins",
        "forenset.families",  # the Family registration object and the families' scan
    ),
    ("forenset.store.run_store", "forenset.store"),
    ("forenset.stages",),
    ("forenset.store.views", "forenset.stats", "forenset.funnel"),  # SQL, footers of the stages
    # the families' building blocks: the forensic detector, reply parsers, the scorer library
    (
        "forenset.backends",
        "forenset.benchmarks.common",
        "forenset.benchmarks.*.scorers",
        "forenset.benchmarks.*.config",  # a family's config model (its build-config section)
        "forenset.benchmarks.fakebench.official",  # the official release's format
        "forenset.benchmarks.fakebench.judged",  # FakeBench's judged C/P/R (its stage reads it)
        "forenset.benchmarks.reward.release",  # XAIGID-RewardBench's release format (read)
        "forenset.benchmarks.public.formats",  # the public benchmarks' release layouts
    ),
    (
        "forenset.tasks",
        "forenset.benchmarks.*.stages",
        # stage helpers the families share (they read through the stage base class)
        "forenset.benchmarks.common.reads",
        "forenset.benchmarks.common.predictions",
        "forenset.benchmarks.common.training",
        "forenset.benchmarks.common.respond",  # runs the responders (common.responders)
    ),
    # a family's report section, exports and set assembly (the default for a family module)
    ("forenset.exports", "forenset.report", "forenset.benchmarks"),
    ("forenset.config",),
    ("forenset.scheduler", "forenset.worker"),
    ("forenset.flows",),
    (
        "forenset.cli",
        "forenset.exports.cli",
        "forenset.perturbations.cli",
        "forenset.benchmarks.*.cli",  # a family's Typer sub-app (and common/cli, what they share)
    ),
    ("forenset.testing",),  # loopback fake servers for tests and benches
]


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def matches(module: str, prefix: str) -> bool:
    """``module`` is ``prefix`` or inside it; a ``*`` in the prefix stands for one name (the
    benchmark family: ``forenset.benchmarks.*.stages``)."""
    m, p = module.split("."), prefix.split(".")
    return len(m) >= len(p) and all(a == b or b == "*" for a, b in zip(m, p, strict=False))


def layer_of(module: str) -> int:
    """The layer of the most specific matching prefix: the most names, then the fewest ``*``."""
    best: tuple[int, int] = (-1, 0)
    where = -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            rank = (p.count(".") + 1, -p.count("*"))
            if matches(module, p) and rank > best:
                best, where = rank, i
    assert where >= 0, f"{module} is in no layer: add it to LAYERS and to docs/design.md"
    return where


def imports_of(path: Path, module: str) -> set[str]:
    """forenset modules imported by one file (resolved to modules, not names)."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:  # `from forenset.store import views` imports a module
                sub = PKG.parent / (base + "." + a.name).replace(".", "/")
                if sub.with_suffix(".py").exists() or (sub / "__init__.py").exists():
                    found.add(f"{base}.{a.name}")
                else:  # a name defined by the module itself
                    found.add(base)
    return {m for m in found if m == "forenset" or m.startswith("forenset.")}


def graph() -> dict[str, set[str]]:
    mods = {module_name(p): p for p in PKG.rglob("*.py")}
    return {m: {i for i in imports_of(p, m) if i in mods and i != m} for m, p in mods.items()}


def test_no_module_imports_a_higher_layer():
    upward = [
        f"{m} (layer {layer_of(m)}) imports {i} (layer {layer_of(i)})"
        for m, deps in graph().items()
        for i in deps
        if i != "forenset" and layer_of(i) > layer_of(m)
    ]
    assert not upward, "upward imports:\n" + "\n".join(sorted(upward))


def test_no_import_cycles():
    g = graph()
    # a package __init__ that only re-exports lazily imports nothing; skip the bare package
    g = {m: {i for i in d if i != "forenset"} for m, d in g.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in g:
        if v not in index:
            strong(v)
    assert not cycles, f"import cycles: {cycles}"


def test_the_layer_map_is_the_documented_one():
    design = (PKG.parent / "docs" / "design.md").read_text()
    for prefixes in LAYERS:
        for p in prefixes:
            assert f"`{p}`" in design, f"layer {p} is not on docs/design.md's map"


def test_the_checker_sees_an_upward_import(tmp_path):
    """The walker must resolve relative and lazy imports, or the layer test passes vacuously."""
    src = tmp_path / "x.py"
    src.write_text("def f():\n    from forenset.flows.build import run_build\n")
    assert "forenset.flows.build" in imports_of(src, "forenset.store.x")
    rel = tmp_path / "y.py"
    rel.write_text("from ..flows import build\n")
    assert "forenset.flows.build" in imports_of(rel, "forenset.store.y")
    deps = defaultdict(set, graph())
    assert "forenset.scheduler" in deps["forenset.flows.build"]


def test_no_stage_imports_another_stage():
    """Stages share code through helper modules (``forenset.tasks.shared``, ``.modelcall``,
    ``.strategy``; a family's ``forenset.benchmarks.common`` and config module), never by
    importing another stage's module (issue 30): a stage can be inserted or removed alone."""
    from forenset.stages import targets

    stage_modules = {target.partition(":")[0] for target in targets().values()}
    g = graph()
    found = [
        f"{m} imports {i}"
        for m in sorted(stage_modules)
        for i in sorted(g[m])
        if i in stage_modules
    ]
    assert not found, "stage imports another stage:\n" + "\n".join(found)
