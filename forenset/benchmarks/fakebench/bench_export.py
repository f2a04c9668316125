"""FakeBench benchmark export: the fakebench_items table as an HF dataset, and a Label Studio task
for people to verify and supplement the golden clues (the paper's humans-in-the-loop, §3.4).

``export_fakebench_bench`` writes one dataset config per task, each a Parquet file with the
``datasets`` features in its schema metadata and a card listing the configs, so
``datasets.load_dataset(out, "fakeclass")`` (or ``"fakeclue"``, ``"fakeqa"``) loads it with the
image as an ``Image``:

* ``fakeclass``: image, question, answer (yes / no / real / fake), form, label;
* ``fakeclue``: image, the question of its mode (``form``: inference or fault_finding), the
  golden clue C, its clues (JSON) and
  dimensions, and where C came from (``golden_source``: model, offline-diff, human-edited);
* ``fakeqa``: image, dimension, question, golden answer.

``export_clue_task`` writes ``fakeclue_tasks.json`` + ``fakeclue_config.xml``: one task per fake
with the golden clue prefilled (as a prediction) in a text area named
:data:`forenset.benchmarks.fakebench.text.CLUE_FIELD`. Its Label Studio JSON export, named by
``fakebench.clue_edits``, replaces the clues on the next build (only fakebench_items recomputes).
Only ok items are exported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from forenset.benchmarks.fakebench.text import CLUE_FIELD, FAULT_FINDING_QUESTION
from forenset.exports.data import write_atomic, write_images
from forenset.store.run_store import RunStore

TASKS = ("fakeclass", "fakeclue", "fakeqa")
COLUMNS: dict[str, tuple[str, ...]] = {
    "fakeclass": ("item_id", "sample_id", "label", "generator", "form", "question", "answer"),
    "fakeclue": ("item_id", "sample_id", "generator", "form", "question", "answer", "clues",
                 "golden_source"),
    "fakeqa": ("item_id", "sample_id", "generator", "dimension", "question", "answer",
               "golden_source"),
}  # fmt: skip
IMAGE_T = pa.struct([("bytes", pa.binary()), ("path", pa.string())])

CLUE_XML = f"""<View>
  <Header value="{FAULT_FINDING_QUESTION} Check each clue against the image; correct, delete or add clues."/>
  <Image name="image" value="$image" zoom="true"/>
  <Text name="dimensions" value="$dimensions"/>
  <TextArea name="{CLUE_FIELD}" toName="image" editable="true" maxSubmissions="1" rows="8"
            placeholder="The golden clues: where the image gives itself away, and how."/>
</View>
"""


def load_items(store: RunStore) -> list[dict[str, Any]]:
    """The ok fakebench_items rows (empty when the stage did not run)."""
    out: list[dict[str, Any]] = []
    for info in store.manifest("fakebench_items"):
        t = store.read_shard(info)
        out.extend(r for r in t.to_pylist() if r["status"] == "ok")
    return sorted(out, key=lambda r: (r["task"], r["rank"] or 0, r["item_id"]))


def _features(task: str) -> dict[str, Any]:
    f: dict[str, Any] = {"image": {"_type": "Image"}}
    f.update({c: {"dtype": "string", "_type": "Value"} for c in COLUMNS[task]})
    if task == "fakeclue":
        f["dimensions"] = {"feature": {"dtype": "string", "_type": "Value"}, "_type": "List"}
    return f


def _schema(task: str) -> pa.Schema:
    fields = [pa.field("image", IMAGE_T), *(pa.field(c, pa.string()) for c in COLUMNS[task])]
    if task == "fakeclue":
        fields.append(pa.field("dimensions", pa.list_(pa.string())))
    meta = {"huggingface": json.dumps({"info": {"features": _features(task)}})}
    return pa.schema(fields, metadata=meta)


def export_fakebench_bench(store: RunStore, out: Path) -> dict[str, Any]:
    """Write ``out/<task>/test-00000-of-00001.parquet`` per task and ``out/README.md``."""
    items = load_items(store)
    if not items:
        raise ValueError("the run has no fakebench_items: build it with fakebench.enabled")
    counts: dict[str, int] = {}
    for task in TASKS:
        mine = [i for i in items if i["task"] == task]
        if not mine:
            continue
        recs = []
        for i in mine:
            r: dict[str, Any] = {
                "image": {"bytes": store.get_blob(i["blob"]), "path": i["blob"].rsplit("/", 1)[-1]}
            }
            r.update({c: i.get(c) for c in COLUMNS[task]})
            if task == "fakeclue":
                r["dimensions"] = list(i.get("dimensions") or [])
            recs.append(r)
        path = out / task / "test-00000-of-00001.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        pq.write_table(pa.Table.from_pylist(recs, schema=_schema(task)), tmp, compression="zstd")
        tmp.replace(path)
        counts[task] = len(recs)
    header = {
        "task_categories": ["image-classification", "visual-question-answering"],
        "tags": ["fakebench", "ai-generated-image-detection", "explainability"],
        "configs": [
            {"config_name": t, "data_files": [{"split": "test", "path": f"{t}/*.parquet"}]}
            for t in TASKS
            if t in counts
        ],
    }
    sources = sorted({i["golden_source"] for i in items if i["task"] == "fakeclue"})
    card = (
        "---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n\n# FakeBench (forenset)\n\n"
        "FakeClass (one closed question per image, scored by exact match), FakeClue (golden "
        "clues in FakeBench's 14 dimensions) and FakeQA (one open question per dimension). "
        f"Golden clues come from: {', '.join(sources) or 'none'} "
        "(`offline-diff` = written from measured pixel or VLM differences, not by a person or "
        "a model reading the image).\n\n"
        + "".join(f"- {t}: {n} items\n" for t, n in counts.items())
    )
    write_atomic(out / "README.md", card)
    return {"format": "fakebench-hf", "path": str(out), "counts": counts}


def export_clue_task(
    store: RunStore, out: Path, *, image_url_prefix: str = "/data/local-files/?d="
) -> dict[str, Any]:
    """Write the FakeClue editing task: ``fakeclue_tasks.json``, ``fakeclue_config.xml`` and
    the images. Each task carries the golden clue as a prediction to accept or edit."""
    items = load_items(store)
    done: set[str] = set()  # one task per fake: both FakeClue modes share the golden clue
    clues = []
    for i in items:
        if i["task"] == "fakeclue" and i["sample_id"] not in done:
            done.add(i["sample_id"])
            clues.append(i)
    if not clues:
        raise ValueError("the run has no FakeClue items to edit")
    refs = write_images(store, [i["blob"] for i in clues], out)
    tasks = []
    for i in clues:
        tasks.append(
            {
                "data": {
                    "image": image_url_prefix + refs[i["blob"]],
                    "sample_id": i["sample_id"],
                    "dimensions": ", ".join(i.get("dimensions") or []),
                    "golden_source": i["golden_source"],
                },
                "predictions": [
                    {
                        "model_version": f"forenset-{i['golden_source']}",
                        "result": [
                            {
                                "from_name": CLUE_FIELD,
                                "to_name": "image",
                                "type": "textarea",
                                "value": {"text": [i["answer"]]},
                            }
                        ],
                    }
                ],
            }
        )
    write_atomic(out / "fakeclue_tasks.json", json.dumps(tasks, indent=1, ensure_ascii=False))
    write_atomic(out / "fakeclue_config.xml", CLUE_XML)
    return {"format": "fakebench-labelstudio", "path": str(out), "counts": {"tasks": len(tasks)}}
