"""One bad model reply is one error row: the shard commits and the other items stay ok.

Each model stage gets one item's replies spoiled on their way out of the fake server (the
HTTP edge). Most get a lone UTF-16 surrogate escape in a text field ("\\ud83d", half an emoji,
as models now and then emit): it is valid JSON and passes the schema and the validators, but
cannot be written as Arrow text, so turning that one reply into rows fails. ``diffs`` writes
reply text only JSON-escaped (a surrogate there is harmless), so its item gets a reply that is
not JSON at all. Every case checks that the stage's shards commit, that exactly the spoiled
item is an error row saying why (not retryable: the same reply would come back), and that the
other items of the stage are ok.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from forenset.config import validate_config
from forenset.flows.local import run_local
from forenset.stages import stage_class
from forenset.store.run_store import RunStore
from tests.conftest import small_config_dict
from tests.helpers import rows
from tests.stages.fixtures import *  # noqa: F403 - pytest fixtures (see fixtures.py)
from tests.stages.scripted import ScriptedSafetyModel, llm, squash

SURROGATE = "\ud83d"  # the first half of an emoji's surrogate pair, alone
UNUSABLE = "unusable model reply"  # how the stages name a reply they cannot turn into rows


class SpoilOneItem:
    """Answers like the scripted model, except for one item of one template: the first request
    carrying ``marker`` picks the item, and it and every later request continuing it (same
    images, its text as a prefix: repairs and regenerations) get ``spoil``ed replies."""

    def __init__(self, inner: Any, marker: str, spoil: Callable[[Any], Any]):
        self.inner, self.m = inner, inner.m
        self.marker, self.spoil = marker, spoil
        self.item: tuple[str, list[bytes]] | None = None
        self.spoiled = 0
        self.asked = 0  # requests carrying the marker: the spoiled item's and the others'
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Any:
        reply = self.inner(body)
        text = self.m.request_text(body)
        if self.marker not in text:
            return reply
        images = self.m.request_images(body)
        with self.lock:
            self.asked += 1
            if self.item is None:
                self.item = (text, images)
            mine = text.startswith(self.item[0]) and images == self.item[1]
            self.spoiled += mine
        return self.spoil(reply) if mine else reply


def with_surrogate(path: tuple[Any, ...]) -> Callable[[Any], Any]:
    """A spoiler that appends a lone surrogate to the string at ``path`` of the reply."""

    def spoil(reply: dict[str, Any]) -> dict[str, Any]:
        reply = json.loads(json.dumps(reply))  # a copy
        node = reply
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = f"{node[path[-1]]} {SURROGATE}"
        return reply

    return spoil


def not_json(reply: Any) -> str:
    return "The second image shows the same scene with one patch changed."


def blob_of(store: RunStore, row: dict[str, Any]) -> bytes:
    return store.get_blob(row["blob"])


def sample_blob(store: RunStore, row: dict[str, Any]) -> bytes:
    [s] = [r for r in rows(store, "splits") if r["sample_id"] == row["sample_id"]]
    return store.get_blob(s["blob"])


@dataclass(frozen=True)
class Case:
    stage: str
    marker: str  # system text of the template whose reply is spoiled (the scripted router's)
    spoil: Callable[[Any], Any]
    reason: tuple[str, ...]  # what the spoiled item's error row says
    # True when the error row belongs to the spoiled request (its text and images)
    belongs: Callable[[RunStore, dict[str, Any], str, list[bytes]], bool]
    over: dict[str, Any] = field(default_factory=dict)  # stage config besides ``llm``
    upstream: dict[str, Any] = field(default_factory=dict)  # other stages' config sections
    safety: bool = False  # scenarios / prompts: the SafeIMG scripted model, no photos


CASES = [
    Case(
        "captions",
        "You describe photographs",
        with_surrogate(("caption",)),
        (UNUSABLE, "surrogates not allowed"),
        lambda store, bad, text, images: blob_of(store, bad) in images,
        over={"keep_manifest": False},
    ),
    Case(
        "instructions",
        "You design image manipulations",
        with_surrogate(("instructions", 0, "expected_change")),
        (UNUSABLE, "surrogates not allowed"),
        lambda store, bad, text, images: squash(bad["caption"]) in squash(text),
    ),
    Case(
        "diffs",
        "You compare two images",
        not_json,
        ("not valid JSON",),
        lambda store, bad, text, images: (
            images == [store.get_blob(bad["source_blob"]), blob_of(store, bad)]
        ),
    ),  # fmt: skip
    Case(
        "judgments",
        "You audit image edits",
        with_surrogate(("rationale",)),
        (UNUSABLE, "surrogates not allowed"),
        lambda store, bad, text, images: (
            squash(json.loads(bad["instruction"])["text"]) in squash(text)
        ),
    ),
    Case(
        "explanations",
        "examine genuine photographs",  # authenticity: a real sample, one reply, one row
        with_surrogate(("explanation",)),
        (UNUSABLE, "surrogates not allowed"),
        lambda store, bad, text, images: images == [sample_blob(store, bad)],
        # edits whose offline wording the scripted complex explanation can quote without
        # hedging ("as if ..."), so every other item is ok
        upstream={"instructions": {"kinds": {"recolor": 1.0, "removal": 1.0, "copy_move": 1.0}}},
    ),
    Case(
        "scenarios",
        "scenario instances",
        with_surrogate(("scenarios", 0, "detail")),
        (UNUSABLE, "surrogates not allowed"),
        lambda store, bad, text, images: f"Category {bad['category']} - " in text,
        over={"per_category": 3, "categories": ["P1", "I2"]},
        safety=True,
    ),
    Case(
        "prompts",
        "ews-narration",
        with_surrogate(("prompt",)),
        (UNUSABLE, "surrogates not allowed"),
        lambda store, bad, text, images: (
            f"Scenario: {bad['content']}, shown as {bad['media_form']}." in text
        ),
        safety=True,
    ),
]


def build(tmp_path, case: Case, settings: dict[str, Any]):
    section = {**case.over, "llm": settings}
    if case.safety:
        scen = {"per_category": 3, "categories": ["P1"]}
        over = {"sources": {"samples": "none"}, "scenarios": scen, case.stage: section}
        if case.stage == "scenarios":
            over["scenarios"] = section
    else:  # two photos in one shard, one generator: every stage's items share a shard
        over = {
            "sources": {"samples": ["astronaut", "coffee"], "max_side": 64},
            "shard_size": 4,
            "generators": [{"name": "cv-a", "family": "classical"}],
            "scenarios": {"enabled": False},
            "splits": {"fractions": {"train": 1.0}},
            **case.upstream,
            case.stage: section,
        }
    return validate_config(small_config_dict(tmp_path / "run", **over))


@pytest.mark.parametrize("case", CASES, ids=[c.stage for c in CASES])
def test_one_bad_reply_is_one_error_row(tmp_path, server, case):
    backend, srv, model = server
    inner = ScriptedSafetyModel(model.m) if case.safety else model
    srv.reply = spoiler = SpoilOneItem(inner, case.marker, case.spoil)
    store, stats, _ = run_local(build(tmp_path, case, llm(backend, srv)))

    assert not any(st.failures for st in stats.values()), {
        k: v.failures for k, v in stats.items() if v.failures
    }  # every shard committed
    assert spoiler.item is not None and spoiler.spoiled >= 1
    got = rows(store, case.stage)
    bad = [r for r in got if r["status"] != "ok"]
    key = stage_class(case.stage).key
    assert len(bad) == 1, [(r[key], r["error"]) for r in bad]
    [err] = bad
    assert all(part in err["error"] for part in case.reason), err["error"]
    assert err["retryable"] is False
    assert case.belongs(store, err, *spoiler.item)  # the error is the spoiled item's
    others = [r for r in got if r is not err]
    assert others and all(r["status"] == "ok" for r in others)
    assert spoiler.asked > spoiler.spoiled  # other items of the template were asked too
