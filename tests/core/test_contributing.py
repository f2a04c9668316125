"""CONTRIBUTING's recipes, executed as written: "Adding a stage", "Adding a stage between
verdicts and splits" (a gate) and "Adding an image backend".

Module blocks are written as modules of the forenset package (in a temporary folder added to
the package path), a registry line is added to ``BUILTIN`` where the recipe says, an entry
point is installed as pip would leave it (a dist-info folder), and README rows are taken from
the recipe: the example must pass the same contract checks as every registered stage and
produce rows in a real build, with no other file of forenset changed.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import yaml

import forenset.backends.image
import forenset.schemas
import forenset.tasks
from forenset import stages
from forenset.config import assemble
from tests.conftest import small_config_dict
from tests.core.test_stage_registry import check_stage_contract
from tests.core.test_stage_typing import config_type
from tests.helpers import rows, run_local

ROOT = Path(__file__).resolve().parents[2]


def blocks_of(title: str) -> list[tuple[str, str]]:
    """The fenced blocks (language, body) of one CONTRIBUTING section."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    part = text[text.index(f"## {title}\n") :]
    end = part.find("\n## ")
    part = part if end < 0 else part[:end]
    return re.findall(r"```(\w*)\n(.*?)```", part, re.S)


def recipe() -> dict[str, str]:
    blocks = blocks_of("Adding a stage")
    out = {}
    for lang, body in blocks:
        if "SCHEMA = stage_schema" in body:
            out["schema"] = body
        elif "class Watermarks(RowStage[WatermarksConfig])" in body:
            out["stage"] = body
        elif lang == "python" and "BUILTIN" in body:
            out["registry"] = body
        elif body.startswith("| watermarks |"):
            out["readme"] = body
    assert set(out) == {"schema", "stage", "registry", "readme"}, sorted(out)
    return out


@pytest.fixture
def watermarks(tmp_path, monkeypatch):
    r = recipe()
    for pkg, key in ((forenset.schemas, "schema"), (forenset.tasks, "stage")):
        folder = tmp_path / pkg.__name__.rpartition(".")[2]
        folder.mkdir()
        (folder / "watermarks.py").write_text(r[key])
        monkeypatch.setattr(pkg, "__path__", [*pkg.__path__, str(folder)])
    line = re.search(r'"watermarks": "([\w.:]+)"', r["registry"]).group(1)
    after = re.search(r'"(\w+)": "[\w.:]+",\n\s+"watermarks"', r["registry"]).group(1)
    reg = {}
    for name, target in stages.BUILTIN.items():
        reg[name] = target
        if name == after:
            reg["watermarks"] = line
    monkeypatch.setattr(stages, "BUILTIN", reg)
    yield r
    for mod in ("forenset.tasks.watermarks", "forenset.schemas.watermarks"):
        sys.modules.pop(mod, None)
    stages._load.cache_clear()


def test_the_recipe_stage_passes_the_registry_checks_and_builds(watermarks, tmp_path):
    cls = stages.stage_class("watermarks")
    names = stages.stage_names()
    assert names.index("watermarks") > names.index("candidates")
    model = assemble()
    readme = (ROOT / "README.md").read_text() + "\n" + watermarks["readme"]
    check_stage_contract(cls, readme, set(model.model_fields))
    assert config_type(cls) is cls.config_model  # RowStage[WatermarksConfig]
    d = small_config_dict(tmp_path / "run")
    d["watermarks"] = {"scale": 2.0}
    d["runners"] = {**d.get("runners", {"default": {"kind": "threads"}}), "watermarks": {}}
    cfg = model.model_validate(d)
    store, stats, _ = run_local(cfg)
    assert stats["watermarks"].ok == stats["candidates"].ok > 0
    assert stats["watermarks"].failed == 0
    got = rows(store, "watermarks")
    assert {r["generator"] for r in got} == {r["generator"] for r in rows(store, "candidates")}
    assert all(r["watermark_score"] > 0 and r["backend"] == "offline" for r in got)


def add_stage(tmp_path, monkeypatch, name: str, source: str, registry: str) -> None:
    """A recipe's stage module as ``forenset.tasks.<name>``, registered where its block says."""
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / f"{name}.py").write_text(source)
    monkeypatch.setattr(forenset.tasks, "__path__", [*forenset.tasks.__path__, str(folder)])
    line = re.search(rf'"{name}": "([\w.:]+)"', registry).group(1)
    after = re.search(rf'"(\w+)": "[\w.:]+",\n\s+"{name}"', registry).group(1)
    reg = {}
    for n, target in stages.BUILTIN.items():
        reg[n] = target
        if n == after:
            reg[name] = line
    monkeypatch.setattr(stages, "BUILTIN", reg)


@pytest.fixture
def sharpness(tmp_path, monkeypatch):
    out = {}
    for lang, body in blocks_of("Adding a stage between verdicts and splits"):
        if "class Sharpness(Gate)" in body:
            out["stage"] = body
        elif lang == "python" and "BUILTIN" in body:
            out["registry"] = body
        elif body.startswith("| sharpness |"):
            out["readme"] = body
    assert set(out) == {"stage", "registry", "readme"}, sorted(out)
    add_stage(tmp_path, monkeypatch, "sharpness", out["stage"], out["registry"])
    yield out
    sys.modules.pop("forenset.tasks.sharpness", None)
    stages._load.cache_clear()


def test_the_gate_recipe_inserts_a_gate_that_splits_reads_without_editing_splits(
    sharpness, tmp_path
):
    from typer.testing import CliRunner

    from forenset.cli import app
    from forenset.tasks.splits import Splits

    assert stages.gate_names() == ["verdicts", "sharpness"]
    assert Splits.inputs == ("captions", "sharpness", "candidates")
    names = stages.stage_names()
    assert names.index("verdicts") < names.index("sharpness") < names.index("splits")
    model = assemble()
    readme = (ROOT / "README.md").read_text() + "\n" + sharpness["readme"]
    check_stage_contract(stages.stage_class("sharpness"), readme, set(model.model_fields))
    d = small_config_dict(tmp_path / "run")
    del d["evaluation"], d["fakebench"]  # the construction half is what the gate changes
    d["sharpness"] = {"min_sharpness": 0.0}
    cfg = model.model_validate(d)
    store, stats, _ = run_local(cfg)
    kept = {r["candidate_id"] for r in rows(store, "verdicts") if r["keep"]}
    gate = rows(store, "sharpness")
    assert kept and {r["candidate_id"] for r in gate} == kept  # it sees what verdicts kept
    assert all(r["keep"] and r["sharpness"] > 0 for r in gate)

    # a threshold at the median discards the blurrier half: the gate and what follows re-run,
    # Edit-Check does not, and splits holds none of the candidates the gate discarded
    d["sharpness"] = {"min_sharpness": float(np.median([r["sharpness"] for r in gate]))}
    store, stats, _ = run_local(model.model_validate(d))
    assert stats["verdicts"].run == 0 and stats["sharpness"].run > 0
    gate = rows(store, "sharpness")
    passed = {r["candidate_id"] for r in gate if r["keep"]}
    dropped = {r["candidate_id"] for r in gate if not r["keep"]}
    assert passed and dropped and stats["sharpness"].discarded == len(dropped)
    fakes = {r["candidate_id"] for r in rows(store, "splits") if r["label"] == "fake"}
    assert fakes and fakes <= passed and not fakes & dropped
    assert store.read_json("state.json")["gates"] == ["verdicts", "sharpness"]
    out = CliRunner().invoke(app, ["status", str(tmp_path / "run")])
    assert out.exit_code == 0, out.output
    assert f"sharpness gate discard rate: {len(dropped) / len(gate):.1%}" in out.output


@pytest.fixture
def posterize(tmp_path, monkeypatch):
    """The recipe's backend module in the forenset package, its entry point installed as pip
    would leave it (a dist-info folder on sys.path)."""
    from forenset.backends.image import factory

    out = {}
    for lang, body in blocks_of("Adding an image backend"):
        if "class Posterize" in body:
            out["module"] = body
        elif lang == "toml":
            out["entry"] = body
        elif lang == "yaml":
            out["generators"] = yaml.safe_load(body)["generators"]
    assert set(out) == {"module", "entry", "generators"}, sorted(out)
    folder = tmp_path / "image"
    folder.mkdir()
    (folder / "posterize.py").write_text(out["module"])
    pkg = forenset.backends.image
    monkeypatch.setattr(pkg, "__path__", [*pkg.__path__, str(folder)])
    entries = tomllib.loads(out["entry"])["project"]["entry-points"][factory.GROUP]
    info = tmp_path / "site" / "forenset_posterize-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: forenset-posterize\nVersion: 0.1\n"
    )
    lines = "".join(f"{k} = {v}\n" for k, v in entries.items())
    (info / "entry_points.txt").write_text(f"[{factory.GROUP}]\n{lines}")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield out
    sys.modules.pop("forenset.backends.image.posterize", None)
    for key in [k for k in factory._LOADED if k[0] == "posterize"]:
        del factory._LOADED[key]


def test_the_image_backend_recipe_edits_in_a_build(posterize, tmp_path):
    import io
    import json

    from PIL import Image

    from forenset.backends.image import factory
    from forenset.backends.image.offline import box_px
    from forenset.config import validate_config

    assert "posterize" in factory.names()
    d = small_config_dict(
        tmp_path / "run",
        generators=posterize["generators"],
        sources={"samples": ["coffee", "rocket"], "max_side": 64},
    )
    del d["evaluation"], d["fakebench"]
    store, _, _ = run_local(validate_config(d))
    cands = rows(store, "candidates")
    assert cands and all(r["status"] == "ok" and r["backend"] == "posterize" for r in cands)
    assert {r["model"] for r in cands} == {"posterize-4"}

    def image(blob: str) -> np.ndarray:
        return np.asarray(Image.open(io.BytesIO(store.get_blob(blob))).convert("RGB"))

    for r in cands:  # the box posterized to multiples of 64, the rest of the photo untouched
        fake, real = image(r["blob"]), image(r["source_blob"])
        x0, y0, x1, y1 = box_px(
            json.loads(r["instruction"])["change_bbox"], r["width"], r["height"]
        )
        assert (fake[y0:y1, x0:x1] % 64 == 0).all()
        outside = np.ones(fake.shape[:2], bool)
        outside[y0:y1, x0:x1] = False
        assert np.array_equal(fake[outside], real[outside])
    assert rows(store, "verdicts")  # the candidates went through Edit-Check
