"""FakeClue (Wen et al. 2025, FakeVLM; huggingface.co/datasets/lingcco/FakeClue).

Layout read: the Hugging Face download, ``data_json/test.json`` (the dataset repository's file,
seen on its file page) beside the images of ``test.zip`` unzipped in place (``test/``; public
download scripts unzip it there; ``test/test/`` when unzipped into a folder of its own name,
or ``data/test/``, FakeVLM's ``playground/data/test/``). The file is a JSON list of records
``{"image": "<source>/<fake|real>/.../<file>", "label": 0 | 1, "cate": ...,
"conversations": [{"from": "human", "value": "<image>Does the image looks real/fake?"},
{"from": "gpt", "value": "<the artifact explanation>"}]}``. ``label`` 1 is real and 0 fake
(FakeVLM's ``scripts/eval.py`` counts ``label == 1`` as real and predicts 1 for "real"); the
strings ``real`` / ``fake`` are accepted too.

One item per record, task ``judgement``: the human turn is the question, the reply's verdict is
scored against ``label`` and the reply against the gpt turn (the reference explanation), as
FakeVLM scores detection and explanation on the same reply. ``width``, ``height`` and any other
field are not read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from forenset.benchmarks.public.formats import records as rec

NAME = "fakeclue"
ANNOTATIONS = ("data_json/test.json", "test.json", "data/test.json", "playground/data/test.json")
IMAGE_DIRS = ("test", "test/test", "data/test", "playground/data/test", "")
QUESTION = "Does the image looks real/fake?"  # FakeVLM's prompt, as in its test.json
LABELS = {0: "fake", 1: "real", "0": "fake", "1": "real", "fake": "fake", "real": "real"}


def files(root: str, annotations: str | None) -> list[str]:
    try:
        return [rec.annotation_file(root, annotations, ANNOTATIONS, "FakeClue annotation file")]
    except (OSError, ValueError):
        return []


def _turns(conv: Any) -> tuple[str, str]:
    """(question, reference) from the conversation; ValueError when it has no gpt turn."""
    if not isinstance(conv, list) or not conv:
        raise ValueError("conversations is missing or not a list")
    human = next(
        (t.get("value") for t in conv if isinstance(t, dict) and t.get("from") == "human"), None
    )
    gpt = next(
        (t.get("value") for t in conv if isinstance(t, dict) and t.get("from") == "gpt"), None
    )
    if not isinstance(gpt, str) or not gpt.strip():
        raise ValueError("conversations has no gpt turn (the reference explanation)")
    question = (human if isinstance(human, str) else QUESTION).replace("<image>", "").strip()
    return question or QUESTION, gpt.strip()


def read(
    root: str, annotations: str | None = None, limit: int | None = None
) -> Iterator[dict[str, Any]]:
    """FakeClue's records as items (module doc); a bad record is an error row."""
    data = rec.read_json(
        rec.annotation_file(root, annotations, ANNOTATIONS, "FakeClue annotation file")
    )
    if not isinstance(data, list):
        raise ValueError("the FakeClue annotation file is not a JSON list of records")
    n = 0
    for i, r in enumerate(data):
        if limit is not None and n >= limit:
            return
        n += 1
        rid = (
            str(r.get("id") or r.get("image") or f"record-{i}")
            if isinstance(r, dict)
            else f"record-{i}"
        )
        if not isinstance(r, dict):
            yield rec.error(NAME, "judgement", rid, f"record {i} is not a JSON object")
            continue
        label = LABELS.get(r.get("label"))
        if label is None:
            yield rec.error(
                NAME, "judgement", rid, f"label {r.get('label')!r} is neither 0 (fake) nor 1 (real)"
            )
            continue
        try:
            question, reference = _turns(r.get("conversations"))
            image = rec.image_path(root, r.get("image"), IMAGE_DIRS)
        except (OSError, ValueError) as e:
            yield rec.error(NAME, "judgement", rid, rec.reason(e))
            continue
        cate = r.get("cate")
        yield rec.record(
            NAME, "judgement", rid,
            label=label, kind=label, category=cate if isinstance(cate, str) else None,
            generator=None, question=question, choices=None, answer=label, asks=None,
            reference=reference, regions=None, images=[image],
        )  # fmt: skip
