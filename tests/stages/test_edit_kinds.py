"""Edit kinds: 2-4 edits per photo by default, the kinds follow what the generator pool
executes (every kind the paper names once an instruction-following editor is in it), an
instruction reaches only generators that execute its kind, and status counts kind x generator."""

from __future__ import annotations

import sys
import textwrap

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from forenset import stats
from forenset.backends.image import factory
from forenset.backends.image.generator import GeneratorConfig
from forenset.config import validate_config
from forenset.images import encode_png
from forenset.store.run_store import RunStore
from forenset.tasks.base import StageContext, dumps
from forenset.tasks.candidates import Candidates
from forenset.tasks.instructions import Instructions, InstructionsConfig
from forenset.text.instructions import OFFLINE_KINDS, instruction_vars
from forenset.text.models import ALL_KINDS
from tests.conftest import small_config_dict
from tests.helpers import rows, run_local
from tests.stages.fixtures import *  # noqa: F403 - pytest fixtures (see fixtures.py)
from tests.stages.scripted import llm

# XPlainVerse Step 1: "attribute and emotion changes, object insertion or removal, copy-move
# duplication, local planar warping, and shape deformation" (+ pose, person-centric)
PAPER_KINDS = {
    "attribute",
    "emotion",
    "insertion",
    "removal",
    "copy_move",
    "local_warp",
    "liquify",
    "pose",
}
GEMINI = {"name": "gem", "backend": "gemini", "family": "api", "gemini": {}}


def cfg_with(tmp_path, gens, **over):
    return validate_config(small_config_dict(tmp_path / "run", generators=gens, **over))


def test_defaults_are_two_to_four_edits_of_the_pools_kinds(tmp_path):
    c = InstructionsConfig()
    assert (c.min_edits, c.max_edits, c.kinds) == (2, 4, None)
    offline = cfg_with(tmp_path, [{"name": "cv-a"}])
    stage = Instructions(StageContext(RunStore(offline.run_dir), offline))
    assert set(stage.kind_weights()) == set(OFFLINE_KINDS)
    mixed = cfg_with(tmp_path, [{"name": "cv-a"}, GEMINI])
    stage = Instructions(StageContext(RunStore(mixed.run_dir), mixed))
    weights = stage.kind_weights()
    assert set(weights) == set(ALL_KINDS) >= PAPER_KINDS
    table = instruction_vars("A photo.", stage.text_config())["kinds_table"]
    assert all(k in table for k in PAPER_KINDS)  # the model path is asked for every kind
    # the fingerprint follows the resolved kinds: adding an API editor re-asks for instructions
    assert stage.stage_config()["kinds"] == weights
    chosen = cfg_with(tmp_path, [GEMINI], instructions={"kinds": {"emotion": 1.0}})
    stage = Instructions(StageContext(RunStore(chosen.run_dir), chosen))
    assert stage.kind_weights() == {"emotion": 1.0}


def test_backends_declare_their_kinds():
    assert GeneratorConfig(name="a").edit_kinds() == frozenset(OFFLINE_KINDS)
    assert len(OFFLINE_KINDS) == 7
    assert GeneratorConfig.model_validate(GEMINI).edit_kinds() == frozenset(ALL_KINDS)
    openai = {"name": "o", "backend": "openai", "openai": {}}
    assert GeneratorConfig.model_validate(openai).edit_kinds() == frozenset(ALL_KINDS)
    from forenset.backends.image.diffusers_generator import DiffusersGenerator

    assert DiffusersGenerator.edit_kinds == frozenset(ALL_KINDS)
    assert factory.backend_class("offline").edit_kinds == frozenset(OFFLINE_KINDS)


PLUGIN = '''
from PIL import ImageOps
from forenset.backends.image.base import ImageResult

class EveryKind:
    """Declares no edit_kinds: a plugin then takes every kind."""
    name = "every"
    tasks = {"edit"}

    @classmethod
    def from_generator(cls, generator):
        return cls()

    def edit(self, requests):
        return [ImageResult(ImageOps.invert(r.image.convert("RGB")), model="inv") for r in requests]

    def generate(self, requests):
        return []
'''


@pytest.fixture
def every_kind_plugin(tmp_path, monkeypatch):
    """A plugin backend installed as a distribution (dist-info on sys.path)."""
    root = tmp_path / "site"
    info = root / "every_kind-0.1.dist-info"
    info.mkdir(parents=True)
    (root / "every_kind_plugin.py").write_text(textwrap.dedent(PLUGIN))
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: every-kind\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{factory.GROUP}]\nevery = every_kind_plugin:EveryKind\n"
    )
    monkeypatch.syspath_prepend(str(root))
    yield
    sys.modules.pop("every_kind_plugin", None)


def test_instructions_reach_only_generators_that_execute_their_kind(tmp_path, every_kind_plugin):
    gens = [{"name": "cv-a"}, {"name": "inv", "backend": "every", "family": "plugin"}]
    cfg = cfg_with(tmp_path, gens)
    store = RunStore(cfg.run_dir)
    stage = Candidates(StageContext(store, cfg))
    img = (np.random.default_rng(0).random((32, 48, 3)) * 255).astype(np.uint8)
    blob = store.put_blob(encode_png(img))
    box = [0.2, 0.2, 0.6, 0.7]
    rows = [
        {
            "instruction_id": f"img-1-i{i}",
            "image_id": "img-1",
            "blob": blob,
            "caption": "A test photo.",
            "text": f"Apply {kind} to the mug.",
            "family": family,
            "kind": kind,
            "target": "the mug",
            "location_hint": "centre",
            "bbox": box,
            "change_bbox": box,
            "expected_change": "the mug changes",
            "difficulty": 3,
            "params": dumps({"colour": "red"} if kind == "recolor" else {}),
        }
        for i, (family, kind) in enumerate(
            [("object", "recolor"), ("person", "emotion"), ("person", "pose")]
        )
    ]
    table = pa.Table.from_pylist(rows)
    out = {}
    for g in cfg.generators:
        spec = stage.spec(
            "shard-00000",
            {"generator": g.name},
            [],
            {
                "generator": g.model_dump(mode="json"),
                "task": "edit",
                "fingerprint": g.fingerprint(),
            },
        )
        out[g.name] = stage.process(table, spec).to_pylist()
    assert [(r["kind"], r["status"]) for r in out["cv-a"]] == [("recolor", "ok")]
    assert sorted(r["kind"] for r in out["inv"]) == ["emotion", "pose", "recolor"]
    assert all(r["status"] == "ok" for r in out["inv"])


def test_status_counts_edits_per_kind_and_generator():
    con = duckdb.connect()
    con.execute(
        """CREATE TABLE candidates AS SELECT * FROM (VALUES
           ('c1', 'recolor', 'cv-a', 'ok'), ('c2', 'recolor', 'inv', 'ok'),
           ('c3', 'emotion', 'inv', 'ok'), ('c4', 'emotion', 'inv', 'error'),
           ('c5', 't2i', 'sd', 'ok')) AS t(candidate_id, kind, generator, status)"""
    )
    con.execute(
        """CREATE TABLE verdicts AS SELECT * FROM (VALUES
           ('c1', true, 'ok'), ('c2', false, 'ok'), ('c3', true, 'ok'))
           AS t(candidate_id, keep, status)"""
    )
    cols, got = stats.run(con, "edits_by_kind_and_generator")
    assert cols == ["kind", "generator", "candidates", "ok", "kept"]
    assert got == [
        ("emotion", "inv", 2, 1, 1),
        ("recolor", "cv-a", 1, 1, 1),
        ("recolor", "inv", 1, 1, 0),
    ]


def test_model_path_proposes_kinds_beyond_the_offline_editor(tmp_path, server, every_kind_plugin):
    """With an every-kind editor in the pool the LLM may propose a reposition (a kind the
    offline editor cannot execute): it is kept, and only that editor makes its candidate."""
    backend, srv, model = server
    plain = model.instructions

    def with_reposition(text, last, images):
        reply = plain(text, last, images)
        first = reply["instructions"][0]
        extra = {**first, "family": "geometry", "kind": "reposition"}
        extra["text"] = f"Move {first['target']} a little to the left."
        extra["expected_change"] = f"{first['target']} sits further left"
        return {"instructions": reply["instructions"] + [extra]}

    model.instructions = with_reposition
    gens = [{"name": "cv-a"}, {"name": "inv", "backend": "every", "family": "plugin"}]
    cfg = validate_config(
        small_config_dict(
            tmp_path / "run",
            sources={"samples": ["astronaut", "coffee"], "max_side": 64},
            generators=gens,
            scenarios={"enabled": False},
            evaluation={"enabled": False},
            instructions={"llm": llm(backend, srv)},
        )
    )
    store, _, _ = run_local(cfg)
    ins = [r for r in rows(store, "instructions") if r["status"] == "ok"]
    moved = {r["instruction_id"] for r in ins if r["kind"] == "reposition"}
    assert len(moved) == 2  # one per photo
    cands = rows(store, "candidates")
    by_gen = {
        g: {r["instruction_id"] for r in cands if r["generator"] == g} for g in ("cv-a", "inv")
    }
    assert by_gen["inv"] == {r["instruction_id"] for r in ins}
    assert by_gen["cv-a"] == {r["instruction_id"] for r in ins} - moved
