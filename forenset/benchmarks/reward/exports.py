"""Reward-benchmark exports: the Label Studio triplet task (App. A's rubric as instructions) and
a Hugging Face dataset of the triplets with their labels (XAIGID-RewardBench's release shape).

Both read the run's ``reward_triplets`` and ``reward_labels`` tables. The Label Studio import of
the completed export is the ``reward_labels`` stage itself (``reward.labels.path``), so labels
are fingerprinted and rescored like any other input.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from forenset.benchmarks.reward.release import FROM_LABEL, IMAGE_TYPE, PREFIX
from forenset.exports.data import write_atomic, write_images
from forenset.exports.hf import IMAGE_T, _image, _write_parquet
from forenset.store.run_store import RunStore
from forenset.text.templates import render

# App. A of XAIGID-RewardBench, verbatim: what annotators weigh.
RUBRIC = (
    ("Hallucination", "Any extraneous details?"),
    ("Details", "Did it get all the important details (distortions)?"),
    ("Logic", "Did it correctly formulate an argument (regardless of wrong/right)?"),
    ("Relevance", "Do the points that the LLM make actually help its argument?"),
    ("Counterargument", "Did it shut down any opposing points?"),
    (
        "Weighing",
        "Did it correctly weigh why the image might be real or fake (lots of points may be "
        "thrown out, but there needs to be a tying thread to unify all the points in favor of "
        "its argument)?",
    ),
    ("Contradiction", "Does the model contradict itself?"),
    ("Insight", "Are the arguments shallow or unrefined?"),
)
CHOICE_VALUES = ("First", "Second", "Tie", "Both Bad")  # §3.3; imported as BothBad


def _escape(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    )


def labeling_config() -> str:
    """The Label Studio labeling config: image, prompt, two responses, four choices; the rubric
    as the instructions panel (App. A). Sources are hidden (App. B)."""
    rubric = " ".join(f"{name}: {q}" for name, q in RUBRIC)
    choices = "\n".join(f'    <Choice value="{c}"/>' for c in CHOICE_VALUES)
    return f"""<View>
  <Header value="Which response explains better whether the image is real or AI-generated?"/>
  <Text name="rubric" value="{_escape("Rubric. " + rubric)}"/>
  <Image name="image" value="$image" zoom="true"/>
  <Text name="prompt" value="$prompt"/>
  <Header value="First response"/>
  <Text name="first" value="$first"/>
  <Header value="Second response"/>
  <Text name="second" value="$second"/>
  <Choices name="choice" toName="image" choice="single" required="true" showInLine="true">
{choices}
  </Choices>
</View>
"""


def _ok(store: RunStore, stage: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for info in store.manifest(stage):
        out.extend(r for r in store.read_shard(info).to_pylist() if r["status"] == "ok")
    return out


def triplets(store: RunStore) -> list[dict[str, Any]]:
    """The ok triplets in presentation order (``position``)."""
    return sorted(_ok(store, "reward_triplets"), key=lambda t: t["position"])


def label_studio_tasks(
    store: RunStore, out: Path, image_url_prefix: str = "/data/local-files/?d="
) -> dict[str, Any]:
    """Write ``out/tasks.json`` (one task per triplet, presentation order), ``out/config.xml``
    and the images under ``out/images/``. Policy names stay out of the task data (App. B)."""
    trips = triplets(store)
    if any(not t.get("blob") for t in trips):
        raise ValueError("the run's triplets have no images (their responses come from a "
                         "reward.release folder), and the Label Studio task shows the image")  # fmt: skip
    refs = write_images(store, [t["blob"] for t in trips], out)
    prompt = render("reward_policy", None)[1]
    tasks = [
        {
            "data": {
                "triplet_id": t["triplet_id"],
                "image": image_url_prefix + refs[t["blob"]],
                "prompt": prompt,
                "first": t["first_reply"],
                "second": t["second_reply"],
            }
        }
        for t in trips
    ]
    write_atomic(out / "tasks.json", json.dumps(tasks, indent=1, ensure_ascii=False))
    write_atomic(out / "config.xml", labeling_config())
    return {"format": "label-studio", "path": str(out), "tasks": len(tasks)}


COLUMNS = {
    "triplet_id": "string", "reward_image_id": "string", "generator": "string",
    "authenticity": "string", "prompt": "string", "first_policy": "string",
    "second_policy": "string", "first_response": "string", "second_response": "string",
    "position": "int64", "label": "string", "label_source": "string", "tied": "bool",
    "n_annotations": "int64", "votes": "string",
}  # fmt: skip
_ARROW = {"string": pa.string(), "int64": pa.int64(), "bool": pa.bool_()}


def hf_schema() -> pa.Schema:
    feats = {"image": {"_type": "Image"}} | {
        c: {"dtype": d, "_type": "Value"} for c, d in COLUMNS.items()
    }
    fields = [pa.field("image", IMAGE_T)] + [pa.field(c, _ARROW[d]) for c, d in COLUMNS.items()]
    return pa.schema(fields, metadata={"huggingface": json.dumps({"info": {"features": feats}})})


def export_reward_hf(store: RunStore, out: Path) -> dict[str, Any]:
    """``out/data/test-00000-of-00001.parquet`` + ``out/README.md``: every triplet with its
    image, both responses, and its label (null when unlabelled or tied). ``label_source`` says
    human or simulated, so simulated labels cannot pass for human ones."""
    labels = {r["triplet_id"]: r for r in _ok(store, "reward_labels")}
    prompt = render("reward_policy", None)[1]
    records = []
    for t in triplets(store):
        lab = labels.get(t["triplet_id"], {})
        records.append(
            {
                "image": _image(store, t["blob"]),
                "triplet_id": t["triplet_id"],
                "reward_image_id": t["reward_image_id"],
                "generator": t["generator"],
                "authenticity": t["label"],
                "prompt": prompt,
                "first_policy": t["first_policy"],
                "second_policy": t["second_policy"],
                "first_response": t["first_reply"],
                "second_response": t["second_reply"],
                "position": t["position"],
                "label": lab.get("label"),
                "label_source": lab.get("source"),
                "tied": lab.get("tied"),
                "n_annotations": lab.get("n_annotations"),
                "votes": lab.get("votes"),
            }
        )
    name = "data/test-00000-of-00001.parquet"
    _write_parquet(
        out / name, hf_schema(), [records[i : i + 100] for i in range(0, len(records), 100)]
    )
    sources = sorted({r["label_source"] for r in records if r["label_source"]})
    meta = {
        "configs": [{"config_name": "default", "data_files": [{"split": "test", "path": name}]}],
        "tags": ["reward-model", "ai-generated-image-detection", "explanations"],
    }
    card = (
        "---\n" + yaml.safe_dump(meta, sort_keys=False) + "---\n\n# forenset reward benchmark\n\n"
        f"{len(records)} triplets (image, first response, second response) with 4-way labels "
        "First / Second / Tie / BothBad (XAIGID-RewardBench §3.3). Label source: "
        f"{', '.join(sources) or 'none'}"
        + (" — **simulated annotators, not human judgments**." if "simulated" in sources else ".")
        + "\n"
    )
    write_atomic(out / "README.md", card)
    return {"format": "hf", "path": str(out), "triplets": len(records)}


# -- export ------------------------------------------------------------------------------------
def _policy_file(policy: str, label: str) -> str:
    return f"{PREFIX[label]}{policy}.json"


def export_release(responses: Iterable[Mapping[str, Any]], triplets: Iterable[Mapping[str, Any]],
                   labels: Iterable[Mapping[str, Any]], out: Path) -> dict[str, int]:  # fmt: skip
    """A run's ok reward rows written in the release's shape under ``out/data/``; annotator ids
    become ``annotator_NNN`` in name order; a simulated label's record carries
    ``"source": "simulated"`` (the release has no such key: it is never taken for a human's)."""
    data = Path(out) / "data"
    files: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in sorted(responses, key=lambda r: str(r["response_id"])):
        files[_policy_file(r["policy"], r["label"])].append(
            {"image_id": r["reward_image_id"], "image_type": IMAGE_TYPE[r["label"]],
             "answer": r.get("reply") or ""})  # fmt: skip
    for name, rows in files.items():
        write_atomic(data / "model_outputs" / name,
                     json.dumps(rows, indent=2, ensure_ascii=False) + "\n")  # fmt: skip
    by_label = {str(lab["triplet_id"]): lab for lab in labels}
    names = sorted({a["annotator"] for lab in by_label.values()
                    for a in json.loads(lab.get("annotations") or "[]")})  # fmt: skip
    anon = {n: f"annotator_{k:03d}" for k, n in enumerate(names, start=1)}
    trip_rows, records = [], {}
    for t in sorted(triplets, key=lambda t: str(t["triplet_id"])):
        base = {"triplet_id": t["triplet_id"], "image_id": t["reward_image_id"],
                "image_type": IMAGE_TYPE[t["label"]], "caption_1": t.get("first_reply") or "",
                "caption_2": t.get("second_reply") or "",
                "csv1": _policy_file(t["first_policy"], t["label"]),
                "csv2": _policy_file(t["second_policy"], t["label"])}  # fmt: skip
        trip_rows.append(base)
        lab = by_label.get(str(t["triplet_id"]))
        if lab is None:
            continue
        anns = {anon[a["annotator"]]: {"choice": FROM_LABEL[a["choice"]]}
                for a in json.loads(lab.get("annotations") or "[]")
                if not a.get("dropped") and a.get("choice") in FROM_LABEL}  # fmt: skip
        rec = {**base, "annotations": anns}
        if lab.get("source") != "human":
            rec["source"] = lab.get("source")
        records[str(t["triplet_id"])] = rec
    write_atomic(data / "triplets" / "benchmark_clean.json",
                 json.dumps(trip_rows, indent=2, ensure_ascii=False) + "\n")  # fmt: skip
    write_atomic(data / "annotations" / "benchmark_annotations.json",
                 json.dumps(records, indent=2, ensure_ascii=False) + "\n")  # fmt: skip
    return {"policy_files": len(files), "responses": sum(len(v) for v in files.values()),
            "triplets": len(trip_rows), "annotated": len(records)}  # fmt: skip
