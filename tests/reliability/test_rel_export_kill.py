"""A killed ``export --format hf`` leaves the previous export whole (issue 32, case 6): the new
one is written beside it and swapped in, so export.json, the card and the data files always
describe each other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from forenset.config import validate_config
from forenset.exports.api import run_export
from forenset.exports.settings import ExportSettings
from tests.conftest import small_config_dict
from tests.helpers import run_local

KILL_AFTER_FIRST_FILE = """
import os, sys
from forenset.exports import hf
from forenset.exports.api import run_export
from forenset.exports.settings import ExportSettings
from forenset.store.run_store import RunStore

real = hf._write_parquet
n = {"files": 0}

def dying(path, schema, groups):
    size = real(path, schema, groups)
    n["files"] += 1
    if n["files"] == 1:
        os._exit(9)  # SIGKILL-like: no cleanup, no finally
    return size

hf._write_parquet = dying
run_export(RunStore(sys.argv[1]), "hf", None, ExportSettings(rows_per_file=int(sys.argv[2])))
"""


def consistent(export: Path) -> dict:
    """export.json, README.md and data/ describe the same files and row counts."""
    doc = json.loads((export / "export.json").read_text())
    card = (export / "README.md").read_text()
    listed = sorted(f for names in doc["files"].values() for f in names)
    on_disk = sorted(str(p.relative_to(export)) for p in (export / "data").glob("*.parquet"))
    assert listed == on_disk
    for split, names in doc["files"].items():
        assert (
            sum(pq.ParquetFile(export / n).metadata.num_rows for n in names)
            == (doc["counts"][split])
        )
        # the card's config names the split's files by a glob: it matches exactly these
        assert f"path: data/{split}-*.parquet" in card
        assert sorted(str(p.relative_to(export)) for p in export.glob(f"data/{split}-*")) == sorted(
            names
        )
    return doc


@pytest.mark.timeout(300)
def test_killed_hf_export_leaves_the_previous_one_whole(tmp_path):
    cfg = validate_config(small_config_dict(tmp_path / "run"))
    store, _, _ = run_local(cfg)
    first = run_export(store, "hf", None, ExportSettings())
    out = Path(first["path"])
    assert out == Path(store.root) / "exports" / "hf"
    before = consistent(out)
    snapshot = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    # re-export with one row per file (more files than before), killed after the first file
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    p = subprocess.run(
        [sys.executable, "-c", KILL_AFTER_FIRST_FILE, store.root, "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert p.returncode == 9, p.stderr
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == snapshot
    assert consistent(out) == before
    assert [x.name for x in out.parent.iterdir() if x.name.startswith(".hf.staging-")]

    # the next export completes, swaps in, and sweeps the dead staging folder
    again = run_export(store, "hf", None, ExportSettings(rows_per_file=1))
    after = consistent(Path(again["path"]))
    assert after["counts"] == before["counts"] and after["files"] != before["files"]
    assert not [x for x in out.parent.iterdir() if x.name.startswith(".hf.")]
