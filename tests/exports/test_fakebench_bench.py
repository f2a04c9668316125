"""fakebench-export: the FakeBench items load with `datasets` (one config per task), and the
FakeClue editing task round-trips through a Label Studio-shaped export into the next build."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from forenset.benchmarks.fakebench.text import CLUE_FIELD, read_clue_edits
from forenset.cli import app
from tests.exports.test_export_formats import _hf_env
from tests.helpers import rows

LOAD = r"""
import json, sys
import datasets
out = sys.argv[1]
res = {}
for cfg in ("fakeclass", "fakeclue", "fakeqa"):
    ds = datasets.load_dataset(out, cfg, split="test")
    res[cfg] = {"n": ds.num_rows, "image": type(ds.features["image"]).__name__,
                "size": list(ds[0]["image"].size), "row": {k: v for k, v in ds[0].items()
                                                          if k != "image"}}
print(json.dumps(res))
"""


def test_fakebench_export_loads_with_datasets_and_the_clue_task(built, tmp_path):
    store, _ = built
    items = [r for r in rows(store, "fakebench_items") if r["status"] == "ok"]
    out = tmp_path / "fb"
    res = CliRunner().invoke(app, ["fakebench-export", str(store.root), "--out", str(out),
                                   "--labelstudio"])  # fmt: skip
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    want = {t: sum(i["task"] == t for i in items) for t in ("fakeclass", "fakeclue", "fakeqa")}
    assert summary["counts"] == {t: n for t, n in want.items() if n}
    proc = subprocess.run(
        [sys.executable, "-c", LOAD, str(out)], capture_output=True, text=True,
        env=_hf_env(tmp_path), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {k: v["n"] for k, v in got.items()} == want
    assert all(v["image"] == "Image" and v["size"][0] > 0 for v in got.values())
    fc = got["fakeclass"]["row"]
    assert fc["answer"] in ("yes", "no", "real", "fake") and fc["form"] in ("yes_no", "what")
    assert got["fakeclue"]["row"]["golden_source"] == "offline-diff"
    assert got["fakeqa"]["row"]["question"].startswith("How is the ")

    # the Label Studio task: one per fake, the clue prefilled; an annotated export reads back
    tasks = json.loads((out / "labelstudio" / "fakeclue_tasks.json").read_text())
    assert len(tasks) == want["fakeclue"]
    xml = (out / "labelstudio" / "fakeclue_config.xml").read_text()
    assert f'name="{CLUE_FIELD}"' in xml and 'value="$image"' in xml
    for t in tasks:  # what Label Studio exports after a person accepted or edited the clue
        pred = t["predictions"][0]["result"]
        t["annotations"] = [{"result": [{**pred[0], "value": {"text": ["Edited: " +
                                         pred[0]["value"]["text"][0]]}}]}]  # fmt: skip
    edits = read_clue_edits(json.dumps(tasks))
    clue_items = {i["sample_id"]: i["answer"] for i in items if i["task"] == "fakeclue"}
    assert edits == {sid: "Edited: " + " ".join(a.split()) for sid, a in clue_items.items()}


def test_fakebench_export_without_items_says_why(tmp_path):
    import pytest

    from forenset.benchmarks.fakebench.bench_export import export_fakebench_bench
    from forenset.store.run_store import RunStore

    with pytest.raises(ValueError, match="no fakebench_items"):
        export_fakebench_bench(RunStore(str(tmp_path / "run")), tmp_path / "out")
