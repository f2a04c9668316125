"""sources reads fsspec URIs (folders, CSVs), Hugging Face datasets saved on disk (hf:PATH) and
COCO caption JSON (coco:PATH); a bad listing stops the build with one sentence."""

from __future__ import annotations

import io
import json

import fsspec
import numpy as np
import pytest
from PIL import Image

from forenset.config import validate_config
from forenset.errors import ConfigurationError
from forenset.scheduler import BuildFailed
from forenset.store.run_store import RunStore
from forenset.tasks.base import StageContext
from forenset.tasks.sources import Sources
from tests.conftest import small_config_dict
from tests.helpers import run_local


def png(seed: int, size=(40, 30)) -> bytes:
    arr = (np.random.default_rng(seed).random((size[1], size[0], 3)) * 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "PNG")
    return buf.getvalue()


def source_rows(tmp_path, **sources) -> list[dict]:
    """Plan and run the sources stage alone; its rows sorted by name."""
    cfg = validate_config(
        small_config_dict(tmp_path / "run", sources={"samples": "none", "max_side": 64, **sources})
    )
    stage = Sources(StageContext(RunStore(cfg.run_dir), cfg))
    out = []
    for spec in stage.plan_sources():
        out.extend(stage.process(stage.read_inputs(spec), spec).to_pylist())
    return sorted(out, key=lambda r: r["name"])


def test_folder_and_csv_by_fsspec_uri(tmp_path):
    fs = fsspec.filesystem("memory")
    fs.pipe("/f20b/photos/a.png", png(1))
    fs.pipe("/f20b/photos/sub/b.png", png(2))
    fs.pipe("/f20b/photos/notes.txt", b"not listed")
    fs.pipe("/f20b/list/c.png", png(3))
    fs.pipe("/f20b/list/photos.csv", b"path,caption,license\nc.png,A red thing.,CC0\n")
    local = tmp_path / "local"
    local.mkdir()
    (local / "d.png").write_bytes(png(4))
    got = source_rows(
        tmp_path,
        folders=["memory://f20b/photos", f"file://{local}"],
        csv=["memory://f20b/list/photos.csv"],
    )
    assert [r["name"] for r in got] == ["a.png", "b.png", "c.png", "d.png"]
    assert all(r["status"] == "ok" and r["width"] == 40 for r in got)
    c = got[2]
    assert (c["source"], c["caption"], c["license"]) == ("csv", "A red thing.", "CC0")
    assert c["uri"] == "memory://f20b/list/c.png"
    assert got[0]["uri"].startswith("memory://") and got[3]["uri"].startswith("file://")


def test_hf_dataset_saved_on_disk(tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict(
        {
            "image": [Image.open(io.BytesIO(png(s))) for s in (5, 6)],
            "caption": ["A first photo.", "A second photo."],
        }
    ).cast_column("image", datasets.Image())
    ds.save_to_disk(str(tmp_path / "hfds"))
    got = source_rows(tmp_path, datasets=[f"hf:{tmp_path / 'hfds'}"])
    assert [(r["source"], r["name"], r["caption"], r["status"]) for r in got] == [
        ("hf", "hfds#0", "A first photo.", "ok"),
        ("hf", "hfds#1", "A second photo.", "ok"),
    ]
    assert got[0]["sha256"] != got[1]["sha256"]


def test_coco_caption_json(tmp_path):
    (tmp_path / "coco" / "imgs").mkdir(parents=True)
    (tmp_path / "coco" / "imgs" / "0001.png").write_bytes(png(7))
    (tmp_path / "coco" / "imgs" / "0002.png").write_bytes(png(8))
    doc = {
        "licenses": [{"id": 4, "name": "Attribution License"}],
        "images": [
            {"id": 1, "file_name": "imgs/0001.png", "license": 4},
            {"id": 2, "file_name": "imgs/0002.png"},
        ],
        "annotations": [
            {"id": 10, "image_id": 1, "caption": "A dog on grass. "},
            {"id": 11, "image_id": 1, "caption": "A brown dog."},
            {"id": 12, "image_id": 2, "caption": "A kitchen."},
        ],
    }
    (tmp_path / "coco" / "captions.json").write_text(json.dumps(doc))
    got = source_rows(tmp_path, datasets=[f"coco:{tmp_path / 'coco' / 'captions.json'}"])
    assert [(r["source"], r["name"], r["caption"], r["license"]) for r in got] == [
        ("coco", "0001.png", "A dog on grass.", "Attribution License"),
        ("coco", "0002.png", "A kitchen.", None),
    ]


@pytest.mark.parametrize(
    "sources, says",
    [
        ({"datasets": ["parquet:/x"]}, "must start with hf:"),
        ({"folders": ["/nonexistent/f20b"]}, "source folder /nonexistent/f20b does not exist"),
        ({"csv": ["/nonexistent/f20b.csv"]}, "CSV /nonexistent/f20b.csv does not exist"),
        ({"datasets": ["coco:/nonexistent/c.json"]}, "COCO caption file"),
        ({"datasets": ["hf:/nonexistent/ds"]}, "is not a dataset saved on disk"),
    ],
)
def test_bad_listing_is_a_configuration_error(tmp_path, sources, says):
    with pytest.raises(ConfigurationError, match=says):
        source_rows(tmp_path, **sources)


def test_bad_listing_fails_the_build_in_one_sentence(tmp_path):
    cfg = validate_config(
        small_config_dict(tmp_path / "run", sources={"samples": "none", "csv": ["/nope/x.csv"]})
    )
    with pytest.raises(BuildFailed) as e:
        run_local(cfg)
    assert str(e.value) == "sources: CSV /nope/x.csv does not exist"


def test_csv_if_present_is_read_when_there_and_skipped_when_not(tmp_path):
    """A photo set fetched by a script (scripts/fetch_real_photos.sh): the examples list it
    under csv_if_present, so they use it once fetched and still build without it."""
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "a.png").write_bytes(png(5))
    (tmp_path / "set" / "photos.csv").write_text("path,caption,license\na.png,,CC0-1.0 (pkg x)\n")
    absent = str(tmp_path / "nope" / "photos.csv")
    assert source_rows(tmp_path, csv_if_present=[absent]) == []
    got = source_rows(tmp_path, csv_if_present=[absent, str(tmp_path / "set" / "photos.csv")])
    assert [(r["name"], r["source"], r["license"], r["status"]) for r in got] == [
        ("a.png", "csv", "CC0-1.0 (pkg x)", "ok")
    ]
