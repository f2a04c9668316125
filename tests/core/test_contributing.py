"""CONTRIBUTING's "Adding a stage" recipe, executed as written.

The schema and stage blocks are written as modules of the forenset package (in a temporary
folder added to the package path), the registry line is added to ``BUILTIN`` where the recipe
says, and the README row is taken from the recipe: the example stage must pass the same
contract checks as every registered stage, get its config section and runner key, and produce
rows in a real build.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import forenset.schemas
import forenset.tasks
from forenset import stages
from forenset.config import assemble
from tests.conftest import small_config_dict
from tests.core.test_stage_registry import check_stage_contract
from tests.core.test_stage_typing import config_type
from tests.helpers import rows, run_local

ROOT = Path(__file__).resolve().parents[2]


def recipe() -> dict[str, str]:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    part = text[text.index("## Adding a stage") :]
    blocks = re.findall(r"```(\w*)\n(.*?)```", part, re.S)
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
