"""External candidates: edited images made elsewhere (a folder with metadata.csv, a CSV, or a
Hugging Face dataset on disk) go through Edit-Check, splits, perturbations and explanations;
each bad row is an error row with its reason."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from PIL import Image

from forenset.config import validate_config
from forenset.scheduler import BuildFailed
from tests.conftest import small_config_dict
from tests.helpers import rows, run_local

W, H = 60, 40
BOX = "0.1,0.2,0.433,0.7"  # where edit_of paints, as fractions


@pytest.fixture
def external_entry_point(tmp_path_factory, monkeypatch):
    """The `external` backend as an installed package registers it (pyproject's entry point),
    without reinstalling the shared environment: a dist-info folder on sys.path."""
    root = tmp_path_factory.mktemp("ep")
    info = root / "forenset_external_ep-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: forenset-external-ep\nVersion: 0.0\n"
    )
    (info / "entry_points.txt").write_text(
        "[forenset.image_backends]\nexternal = forenset.backends.image.external:ExternalImports\n"
    )
    monkeypatch.syspath_prepend(str(root))


def photo(seed: int, size=(W, H)) -> Image.Image:
    rng = np.random.default_rng(seed)
    base = np.linspace(0, 255, size[0])[None, :, None] * np.ones((size[1], 1, 3))
    return Image.fromarray(
        (0.7 * base + 0.3 * rng.random((size[1], size[0], 3)) * 255).astype(np.uint8)
    )


def edit_of(img: Image.Image) -> Image.Image:
    """A visible local edit: a dark block in the left half."""
    arr = np.asarray(img).copy()
    arr[8:28, 6:26] = (20, 20, 160)
    return Image.fromarray(arr)


@pytest.fixture
def folder(tmp_path):
    """Two photos, two good edits and one bad row of each kind."""
    d = tmp_path / "ext"
    (d / "src").mkdir(parents=True)
    (d / "out").mkdir()
    p1, p2 = photo(1), photo(2)
    p1.save(d / "src" / "p1.png")
    p2.save(d / "src" / "p2.png")
    edit_of(p1).save(d / "out" / "e1.png")
    edit_of(p2).save(d / "out" / "e2.png")
    edit_of(photo(2, (50, 40))).save(d / "out" / "small.png")
    (d / "out" / "garbage.png").write_bytes(b"this is no image")
    rows_ = [
        ("src/p1.png", "Paint a blue square on the wall.", "out/e1.png", "flux-kontext", "", BOX),
        ("src/p2.png", "Remove the left object.", "out/e2.png", "qwen-edit", "removal", ""),
        ("src/p1.png", "Add a cat.", "out/missing.png", "flux-kontext", "", ""),
        ("src/p2.png", "Make it blue.", "out/small.png", "flux-kontext", "", ""),
        ("src/p1.png", "Make it red.", "out/garbage.png", "qwen-edit", "", ""),
        ("src/p2.png", "", "out/e2.png", "qwen-edit", "", ""),
        ("src/nosuch.png", "Add a dog.", "out/e1.png", "qwen-edit", "", ""),
    ]
    with open(d / "metadata.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["source", "instruction", "edited", "generator", "kind", "bbox"])
        w.writerows(rows_)
    return d


def config(tmp_path, path, **over):
    gens = [
        {"name": "cv-a", "family": "classical"},
        {
            "name": "imported",
            "backend": "external",
            "family": "external",
            "options": {"path": path},
        },
    ]
    return validate_config(
        small_config_dict(
            tmp_path / "run",
            sources={"samples": "none", "max_side": 48},
            generators=gens,
            evaluation={"enabled": False},
            **over,
        )
    )


def test_folder_of_edits_goes_through_the_pipeline(tmp_path, folder, external_entry_point):
    store, _, _ = run_local(config(tmp_path, str(folder)))
    src = rows(store, "sources")
    ok_src = [r for r in src if r["status"] == "ok"]
    assert sorted(r["name"] for r in ok_src) == ["p1.png", "p2.png"]  # listed once each
    assert all(r["source"] == "external" for r in src)
    (bad_src,) = [r for r in src if r["status"] == "error"]
    assert "nosuch.png" in bad_src["error"]

    cands = [r for r in rows(store, "candidates") if r["generator"] == "imported"]
    ok = [r for r in cands if r["status"] == "ok"]
    errors = sorted(r["error"] for r in cands if r["status"] == "error")
    assert len(ok) == 2 and len(errors) == 4

    def one(fragment: str) -> None:
        assert sum(fragment in e for e in errors) == 1, (fragment, errors)

    one("out/missing.png does not exist")
    one("is 50x40 but its source photo is 60x40")
    one("garbage.png is unreadable: not a recognised image format")
    one("row 5 has no instruction")
    by_model = {r["model"]: r for r in ok}
    assert set(by_model) == {"flux-kontext", "qwen-edit"}
    assert (
        by_model["qwen-edit"]["kind"] == "removal"
        and by_model["flux-kontext"]["kind"] == "external"
    )
    assert all((r["width"], r["height"]) == (48, 32) for r in ok)  # the normalised source's size
    assert all(r["backend"] == "external" for r in cands)

    ids = {r["candidate_id"] for r in ok}
    for stage in ("diffs", "judgments", "verdicts"):
        got = {r["candidate_id"]: r for r in rows(store, stage) if r["candidate_id"] in ids}
        assert set(got) == ids, stage
        assert all(r["status"] == "ok" for r in got.values()), stage
    diffs = {r["candidate_id"]: r for r in rows(store, "diffs") if r["candidate_id"] in ids}
    assert all(r["differences"] not in (None, "[]") for r in diffs.values())  # the edit is seen
    verdicts = {r["candidate_id"]: r for r in rows(store, "verdicts") if r["candidate_id"] in ids}
    boxed = by_model["flux-kontext"]["candidate_id"]
    assert verdicts[boxed]["verdict"] == "KEEP"  # the listed box is where the edit is
    kept = {
        r["sample_id"]: r["candidate_id"]
        for r in rows(store, "splits")
        if r.get("candidate_id") in ids
    }
    assert boxed in kept.values()
    expl = [r for r in rows(store, "explanations") if r["sample_id"] in kept]
    assert {r["sample_id"] for r in expl} == set(kept)
    assert {r["kind"] for r in expl} == {"complex", "simple"}
    assert all(r["status"] == "ok" for r in expl), [r["error"] for r in expl]
    perturbed = [r for r in rows(store, "perturbations") if r.get("sample_id") in kept]
    assert perturbed and all(r["status"] == "ok" for r in perturbed)

    # a row added to the listing is imported on the next build; no other generator recomputes
    with open(folder / "metadata.csv", "a", newline="") as f:
        csv.writer(f).writerow(["src/p2.png", "Tint the block.", "out/e1.png", "x", "", ""])
    store, _, executed = run_local(config(tmp_path, str(folder)))
    again = [r for r in rows(store, "candidates") if r["generator"] == "imported"]
    assert len(again) == len(cands) + 1
    assert {r["model"] for r in again if r["status"] == "ok"} == {"flux-kontext", "qwen-edit", "x"}
    assert executed["candidates"] == 2 and executed["sources"] == 0  # the two import shards


def test_hf_dataset_of_edits(tmp_path, folder, external_entry_point):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict(
        {
            "src": [Image.open(folder / "src" / "p1.png")] * 3,
            "out": [
                Image.open(folder / "out" / "e1.png"),
                Image.open(folder / "out" / "small.png"),
                None,
            ],
            "prompt": ["Paint a blue square on the wall.", "Make it blue.", "Add a hat."],
            "model": ["flux-kontext", "flux-kontext", "flux-kontext"],
        }
    )
    for c in ("src", "out"):
        ds = ds.cast_column(c, datasets.Image())
    ds.save_to_disk(str(tmp_path / "hf"))
    opts = {
        "path": f"hf:{tmp_path / 'hf'}",
        "source_column": "src",
        "edited_column": "out",
        "instruction_column": "prompt",
        "generator_column": "model",
    }
    cfg = config(tmp_path, "x")
    cfg.generators[1].options = opts
    cfg = validate_config(cfg.model_dump(mode="json"))
    store, _, _ = run_local(cfg)
    assert [r["name"] for r in rows(store, "sources")] == ["hf#0/src"]  # listed once
    cands = [r for r in rows(store, "candidates") if r["generator"] == "imported"]
    assert sorted(r["status"] for r in cands) == ["error", "error", "ok"]
    errors = {r["instruction_id"].rsplit("-x", 1)[1]: r["error"] for r in cands}
    assert errors["0"] is None
    assert "is 50x40 but its source photo is 60x40" in errors["1"]
    where = f"row 2 of {tmp_path / 'hf'} has no image in column 'out'"
    assert errors["2"].endswith(f"cannot be read: {where}")


def test_bad_options_fail_config_validation(tmp_path, external_entry_point):
    from forenset.config import ConfigError

    gens = [{"name": "x", "backend": "external", "options": {"paht": "/data"}}]
    with pytest.raises(ConfigError, match=r"options\.path: Field required"):
        validate_config(small_config_dict(tmp_path / "run", generators=gens))


def test_bad_listing_fails_the_build(tmp_path, external_entry_point):
    with pytest.raises(BuildFailed, match="metadata.csv does not exist"):
        run_local(config(tmp_path, str(tmp_path / "nowhere")))
