"""The leave-one-editor-out editors (bench/editors/) are independent and label what they do."""

import ast
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

EDITORS = Path(__file__).resolve().parents[2] / "bench" / "editors"
NAMES = ("clone", "diffusion", "texture")


def load(name):
    path = EDITORS / f"{name}_editor.py"
    spec = importlib.util.spec_from_file_location(f"{name}_editor_t", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", NAMES)
def test_an_editor_shares_no_code_with_forenset_generators_or_the_other_editors(name):
    tree = ast.parse((EDITORS / f"{name}_editor.py").read_text())
    mods = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    mods |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    # only photo loading may come from forenset (the bundled sample photos)
    assert {m for m in mods if m.startswith("forenset")} <= {
        "forenset.images",
        "forenset.tasks.sources",
    }
    assert not any("editor" in m or "independent_edits" in m for m in mods), mods


@pytest.mark.parametrize("name", NAMES)
def test_an_editor_labels_every_fault_and_its_good_edits_change_the_target(name):
    ed = load(name)
    cands = ed.make_set(0, n=20, size=80)
    assert {c.fault for c in cands} == set(ed.EXPECTED_CATEGORY)
    assert {c.listing["generator"] for c in cands} == {ed.NAME}
    for c in cands:
        assert c.real.shape == c.fake.shape and c.listing["bbox"] and c.listing["kind"]
        if c.fault == "good":
            h, w = c.real.shape[:2]
            x0, y0, x1, y1 = c.listing["bbox"]
            box = (slice(int(y0 * h), int(y1 * h) + 1), slice(int(x0 * w), int(x1 * w) + 1))
            d = np.abs(c.fake.astype(int) - c.real.astype(int))[box].mean()
            assert d > 3, (c.op, c.detail)
