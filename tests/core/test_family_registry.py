"""A benchmark family is one registered package (issue 39): a toy family installed as a
distribution (a dist-info folder with a ``forenset.families`` entry point on ``sys.path``)
brings its stage, metric, CLI command and report section with no edit in core, and core
modules name no family."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from forenset import families, stages
from forenset.families import Family, FamilyError

ROOT = Path(__file__).resolve().parents[2]

TOY = '''
import pyarrow as pa
import typer
from pydantic import Field

from forenset.benchmarks.common.scoring import ItemMean
from forenset.confbase import Strict
from forenset.families import Family
from forenset.schemas.common import F64, S, stage_schema
from forenset.tasks.base import RowStage


class ToyConfig(Strict):
    scale: float = Field(1.0, gt=0)


class ToyWidths(RowStage):
    name = "toy_widths"
    inputs = ("sources",)
    input_columns = ("image_id", "width")
    output_schema = stage_schema(pa.field("image_id", S, nullable=False), pa.field("value", F64))
    key = "image_id"
    config_model = ToyConfig
    config_key = "toy"

    def process_row(self, row, shard):
        yield {"image_id": row["image_id"], "value": row["width"] * self.cfg.scale}


TOY_MEAN = ItemMean("toy_mean", "toy mean", lambda item: item["value"], needs=("value",))

app = typer.Typer(add_completion=False)


@app.command("toy-hello")
def hello():
    """Say hello from the toy family."""
    typer.echo("hello from toy")


def section(store, con):
    if not store.manifest("toy_widths"):
        return ""
    n = con.execute("SELECT count(*) FROM toy_widths").fetchone()[0]
    return f"<h2>Toy family</h2><p>{n} toy rows</p>"


FAMILY = Family(
    name="toy",
    title="A toy benchmark",
    stages={"toy_widths": "fs_toy_family:ToyWidths"},
    config_section="toy",
    config="fs_toy_family:ToyConfig",
    metrics={"toy_mean": "fs_toy_family:TOY_MEAN"},
    cli="fs_toy_family:app",
    report="fs_toy_family:section",
)
'''


def install(site: Path, name: str, entry: str, source: str | None = None) -> None:
    """A distribution on ``site``: its module (when given) and its dist-info entry points."""
    if source is not None:
        (site / f"{name}.py").write_text(source)
    dist = site / f"{name}-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[forenset.families]\n{entry}\n")


@pytest.fixture
def toy_family(tmp_path, monkeypatch):
    from forenset import cli
    from forenset.benchmarks.common.scoring import registry

    site = tmp_path / "site"
    site.mkdir()
    install(site, "fs_toy_family", "toy = fs_toy_family:FAMILY", TOY)
    monkeypatch.syspath_prepend(str(site))
    groups = list(cli.app.registered_groups)
    yield "toy"
    cli.app.registered_groups[:] = groups
    cli._MOUNTED.discard("toy")
    sys.modules.pop("fs_toy_family", None)
    stages._load.cache_clear()
    registry._load.cache_clear()


def test_a_toy_family_brings_its_stage_metric_command_and_report_section(toy_family, tmp_path):
    import forenset.config as config_module
    from forenset import cli
    from forenset.benchmarks.common.scoring import registry
    from forenset.flows.local import run_local
    from forenset.report.html import render_report
    from tests.conftest import small_config_dict
    from tests.helpers import rows

    assert "toy" in families.plugin_names() and families.family("toy").title == "A toy benchmark"
    # its stage: registered, placed after the stage it reads, a benchmark stage, with a config
    names = stages.stage_names()
    assert "toy_widths" in names and names.index("toy_widths") > names.index("sources")
    assert stages.is_benchmark_stage("toy_widths") and "toy_widths" in stages.table_names()
    cfg = config_module.assemble().model_validate(
        {**small_config_dict(tmp_path / "run"), "toy": {"scale": 2.0}}
    )
    store, stats, _ = run_local(cfg)
    assert stats["toy_widths"].ok == stats["sources"].ok > 0
    widths = {r["image_id"]: r["width"] for r in rows(store, "sources")}
    assert {r["image_id"]: r["value"] for r in rows(store, "toy_widths")} == {
        k: 2.0 * v for k, v in widths.items()
    }
    # its metric: in the scoring registry under the family's name
    assert "toy" in registry.families() and registry.metric_names("toy") == ["toy_mean"]
    assert registry.scorer("toy", "toy_mean").score([{"value": 1.0}, {"value": 3.0}]).value == 2.0
    # its command: in `forenset --help` and runnable
    cli._mount_families()
    runner = CliRunner()
    got = runner.invoke(cli.app, ["--help"], terminal_width=150)
    assert got.exit_code == 0 and "toy-hello" in got.output
    got = runner.invoke(cli.app, ["toy-hello"])
    assert got.exit_code == 0 and "hello from toy" in got.output
    assert "toy-hello" in cli._own_commands()
    # its report section
    page = render_report(store, gallery=0)
    assert "<h2>Toy family</h2>" in page and f"{len(widths)} toy rows" in page


def test_family_registrations_are_checked(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    install(site, "fs_bad_family", "bad = fs_bad_family:FAMILY", "FAMILY = object()\n")
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(FamilyError, match="not a forenset.families.Family"):
        families.families()
    (site / "fs_bad_family.py").write_text(
        "from forenset.families import Family\n"
        "FAMILY = Family(name='bad', stages={'eval_sets': 'x:Y'})\n"
    )
    sys.modules.pop("fs_bad_family", None)
    monkeypatch.syspath_prepend(str(tmp_path))  # a new sys.path: scanned again
    with pytest.raises(FamilyError, match="'eval_sets' of family"):
        families.families()
    sys.modules.pop("fs_bad_family", None)


def test_the_builtin_families_are_found_without_their_entry_points():
    """The installed metadata may predate the ``forenset.families`` group (an editable install):
    the built-ins come from ``forenset.benchmarks.BUILTIN`` either way, once each."""
    import tomllib

    import forenset.benchmarks

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared["forenset.families"] == forenset.benchmarks.BUILTIN
    found = families.families()
    assert [f.name for f in found] == list(forenset.benchmarks.BUILTIN)
    assert all(isinstance(f, Family) for f in found) and not families.plugin_names()
    for f in found:  # a family's config section is its stages' (config.py adds it)
        if f.config_section:
            owners = [stages.stage_class(n) for n in f.stages]
            assert any(
                c.config_section() == f.config_section
                and families.load_target(f.config) is c.config_model
                for c in owners
            ), f.name


def test_listing_the_families_imports_no_family_code():
    """``forenset --help`` and ``forenset query`` list families, stages and tables by name."""
    code = (
        "import sys; from forenset import families, stages; stages.table_names(); "
        "families.families(); "
        "print(sorted(m for m in sys.modules if m.startswith('forenset.benchmarks.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    loaded = ast.literal_eval(out)
    assert all(m.count(".") == 2 for m in loaded), loaded  # only the families' __init__


# -- core names no family ---------------------------------------------------------------------

# Core: every module outside a family's own package.
CORE = [
    ":(glob)forenset/*.py",
    "forenset/store",
    "forenset/report",
    "forenset/tasks",
    "forenset/exports",
    "forenset/flows",
    "forenset/backends",
    "forenset/benchmarks/common",
]


def family_words() -> list[str]:
    """The built-in families' names, their stages' and tables' names and their packages."""
    words = set()
    for f in families.families():
        words |= {f.name, *f.stages, *f.tables}
    return sorted(words)


def docstring_lines(src: str) -> set[int]:
    """The line numbers of the module's, classes' and functions' docstrings."""
    docs: set[int] = set()
    for node in ast.walk(ast.parse(src)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            first = body[0]
            if isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                docs |= set(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return docs


def code_lines(path: Path) -> list[tuple[int, str]]:
    """The module's code without comments and docstrings (:func:`prose_lines` has those)."""
    src = path.read_text()
    docs = docstring_lines(src)
    keep: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT):
            continue
        if tok.type == tokenize.DEDENT or tok.start[0] in docs:
            continue
        keep[tok.start[0]] = keep.get(tok.start[0], "") + " " + tok.string
    return sorted(keep.items())


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """The module's comments and docstrings, line by line: what :func:`code_lines` leaves out."""
    src = path.read_text()
    lines = src.splitlines()
    keep = {no: lines[no - 1] for no in docstring_lines(src)}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            keep[tok.start[0]] = tok.string
    return sorted(keep.items())


# Core modules that still name a family (issue 39: not moved yet); the list only shrinks.
PENDING: set[str] = set()


# The only places core may spell a family's name, code or prose: (module, exact text) -> why.
# A line of that module is let through when it holds the text.
KEPT_NAMES: dict[tuple[str, str], str] = {
    ("forenset/benchmarks/common/training.py", '"detections"'): (
        "the purpose label of the detector's training draw: changing a seed label changes "
        "every draw made with it, so it stays what it was when the draw was first seeded"
    ),
    ("forenset/exports/formats.py", 'CORE_PROJECT = "safeimg"'): (
        "the key of the built dataset's Label Studio triage + region pair: state files and "
        "``--projects`` name it; the pair is core's, not the family's"
    ),
    ("forenset/paths.py", "non-public address"): (
        "the English word in the private-address refusal, not the public-benchmarks family"
    ),
}


def core_mentions(lines: Callable[[Path], list[tuple[int, str]]] = code_lines) -> list[str]:
    """Each ``lines`` line of a core module that names a family, unless ``KEPT_NAMES`` keeps it."""
    files = subprocess.run(
        ["git", "ls-files", *CORE], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, family_words())) + r")\b", re.IGNORECASE)
    out = []
    for name in files:
        if not name.endswith(".py"):
            continue
        for no, line in lines(ROOT / name):
            if any(f == name and tok in line for f, tok in KEPT_NAMES):
                continue
            if pattern.search(line):
                out.append(f"{name}:{no}: {line.strip()[:160]}")
    return out


def test_core_modules_name_no_family():
    """``git grep`` of core for the families' names and their stages' and tables' names finds
    nothing in code (:func:`test_core_prose_names_no_family` reads the comments and docstrings)."""
    found = core_mentions()
    new = [f for f in found if f.partition(":")[0] not in PENDING]
    assert not new, "core names a family:\n" + "\n".join(new)
    done = PENDING - {f.partition(":")[0] for f in found}
    assert not done, f"no longer names a family, drop from PENDING: {sorted(done)}"


def test_core_prose_names_no_family():
    """Nor in comments and docstrings: core's prose says what core needs ("a family's stages",
    "the paper's protocol"); a citation of a family's paper lives in the family's package."""
    found = core_mentions(prose_lines)
    assert not found, "core prose names a family:\n" + "\n".join(found)


def test_the_kept_names_are_still_there():
    """Every ``KEPT_NAMES`` entry still matches its module, with its reason: the list only
    holds exceptions that exist (a stale one would let a later line through unread)."""
    for (name, text), why in KEPT_NAMES.items():
        assert why and text in (ROOT / name).read_text(), (name, text)


def test_a_family_registers_its_own_responder_kind():
    """FakeBench's ``official`` kind is its package's (``Family.responders``), found before the
    entry points, whose metadata may still name its old place in common/."""
    import tomllib

    from forenset.benchmarks.common import responders

    cls = responders.responder_class("official")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared["forenset.responders"]["official"] == f"{cls.__module__}:{cls.__name__}"
    assert cls.__module__ == "forenset.benchmarks.fakebench.respond"
    assert responders.families_of("official") == ("fakebench",)
    assert responders.families_of("file") == ("evaluation", "reward", "public")
    assert responders.families_of("constant") == ("reward", "fakebench", "public")
    assert set(responders.responder_families()) == {"evaluation", "reward", "fakebench", "public"}
