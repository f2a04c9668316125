"""fakebench_answers: every evaluated model's answer to every FakeBench item (§3.3–3.5).

A gathering stage, one shard per model (``fakebench.models``, partition ``answerer``), each
model reached through its ``llm:`` pool with the item's image attached:

* FakeClass, basic mode: the question alone (template ``fakebench_question``);
* FakeClue, inference mode (Fig. 4c): zero-shot chain of thought, then the verdict
  (template ``fakebench_inference``, ``<reasoning>…</reasoning><answer>real|fake</answer>``); the
  reasoning is the text scored against the golden clue, the verdict is kept (``verdict``; the
  paper's Table 8 compares detection with and without explicit reasoning); in fault-finding
  mode (``clue_modes``) the question "This is a fake image, explain why." alone, zero-shot;
* FakeQA, free mode: each question in its own request, so answers cannot influence each other
  ("every question is tested in an individual <Image> <Question> context").

``kind: constant`` models are offline references (no calls): they judge every image ``belief``
and name no clue (:func:`constant_reply`), the floor any model should beat; rows say
``backend = offline``, ``model = constant-<belief>``.

``kind: official`` reads a model's replies from answer files in the official release's format
(:func:`forenset.benchmarks.fakebench.official.answer_rows`): rows say ``backend = official``.

``kind: detector`` is the evaluation family's offline forensic detector, trained exactly as
``detections`` and the reward family's ``detector`` policy train it (``common.training``: a
seeded draw of ``train_per_class`` per label from the train split), and it looks at each image
once (``ForensicDetector.explain``). It answers only from what it measured:

* FakeClass: its real/fake decision in the question's form (:func:`constant_reply` with the
  decision as the belief: "Yes."/"No." to a yes/no question, "The image is fake." to "What…?"),
  so the §3.2 exact-match rule reads exactly that decision;
* FakeClue, inference mode: its grounded explanation (the most inconsistent region, measured)
  as the reasoning, then its verdict; fault-finding mode: the same explanation;
* FakeQA: :func:`detector_qa`, an answer built from the measured region's z-scores of the
  measures that bear on the dimension (:data:`DETECTOR_DIMENSIONS`), or a null response with
  the reason in ``null_reason`` where it measures nothing relevant (scored as an empty answer).

Rows say ``backend = offline`` and the detector's model name (``forensic-<classifier>-v1``).

A plugin responder (``forenset.responders``) is read as a model's replies are.

A failed call is an error row (retried on resume); a reply without a readable verdict keeps its
reasoning and says why in ``parse_error``. Every kind is a responder (``common.responders``) run
by ``common.respond``, which isolates each item's failure (an error row; the shard goes on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from forenset.benchmarks.common.answers import parse_answer
from forenset.benchmarks.common.forensic import MEASURE_WORDS
from forenset.benchmarks.common.reads import read_tagged
from forenset.benchmarks.common.respond import (
    Answer,
    Question,
    fingerprint,
    render,
    respond,
    trains,
)
from forenset.benchmarks.common.responders import ResponderConfig
from forenset.benchmarks.fakebench import text as fb
from forenset.benchmarks.fakebench.config import ANSWER_TEMPLATES, FakeBenchConfig
from forenset.benchmarks.fakebench.official import Q_FAKE as OFFICIAL_Q_FAKE
from forenset.benchmarks.fakebench.schemas.fakebench_answers import SCHEMA
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage
from forenset.tasks.modelcall import template_hashes

if TYPE_CHECKING:
    from forenset.benchmarks.common.detector import Detection

TEMPLATE = {t: "fakebench_question" for t in ("fakeclass", "fakeclue", "fakeqa")}
CLUE_TEMPLATE = "fakebench_inference"


def constant_reply(belief: str, task: str, form: str | None, question: str) -> str:
    """What a model that judges every image ``belief`` and names no clue replies."""
    if task == "fakeclass":
        if form == "yes_no":
            asks = "fake" if question in (fb.Q_FAKE, OFFICIAL_Q_FAKE) else "real"
            return "Yes." if asks == belief else "No."
        return f"The image is {belief}."
    if task == "fakeclue" and form == "fault_finding":
        return f"No clue was examined; the image was judged {belief}."
    if task == "fakeclue":
        return (
            f"<reasoning>No clue was examined; every image is judged {belief}.</reasoning>\n"
            f"<answer>{belief}</answer>"
        )
    return "No clue was examined."


# The FakeBench dimensions the offline detector's block measures bear on (forensic.MAP_MEASURES):
# noise residual, JPEG error level and colour-channel noise are texture-level traces; sharpness
# and noise are what clarity means ("sharpness and noise differ from the rest of the image").
# It measures nothing about content, geometry, light or layout, so those get no answer.
DETECTOR_DIMENSIONS: dict[str, tuple[str, ...]] = {
    "texture": ("noise", "ela", "chroma"),
    "clarity": ("sharpness", "noise"),
}
_WORDS = list(MEASURE_WORDS.values())
MEASURED = ", ".join(_WORDS[:-1]) + " and " + _WORDS[-1]
DEVIATION_FLOOR = 1.0  # |z| from which a measure is named as deviating (offline._claims' floor)


def detector_qa(dimension: str, found: Detection) -> tuple[str | None, str | None]:
    """(answer, None) built only from the detector's measured region for a dimension its measures
    bear on, else (None, the reason it gives no answer)."""
    measures = DETECTOR_DIMENSIONS.get(dimension)
    if not measures:
        return None, (
            f"the forensic detector measures only the {MEASURED} of image blocks; none of them "
            f"bears on {dimension}"
        )
    if found.position is None or found.bbox is None or not found.evidence:
        return None, (
            "the image is uniform: the forensic detector found no region to compare with the "
            f"rest, so it measured nothing about {dimension}"
        )
    x0, y0, x1, y1 = found.bbox
    zs = {m: float(found.evidence.get(m, 0.0)) for m in measures}
    parts = [
        f"{MEASURE_WORDS[m]} is {abs(z):.1f} sigma {'above' if z > 0 else 'below'} the rest"
        for m, z in zs.items()
    ]
    text = (
        f"In the {found.position} of the image (x {x0:.2f}-{x1:.2f}, y {y0:.2f}-{y1:.2f}), the "
        f"region that departs most from the rest, {' and '.join(parts)}"
    )
    if any(abs(z) >= DEVIATION_FLOOR for z in zs.values()):
        return text + f"; the {dimension} there does not match the rest of the image.", None
    return (
        text + f"; within {DEVIATION_FLOOR:g} sigma, the {dimension} shows no sign of editing.",
        None,
    )


def _unreadable(text: str) -> str | None:
    return parse_answer(text).reason


class FakeBenchAnswers(Stage[FakeBenchConfig]):
    name = "fakebench_answers"
    version = "3"  # 3: the offline detector trains class-balanced
    inputs = ("splits", "fakebench_items")
    input_columns = {
        "splits": ("sample_id", "label", "split", "blob"),  # the detector models' training
        "fakebench_items": (
            "item_id", "task", "sample_id", "label", "blob", "form", "question", "dimension",
        ),
    }  # fmt: skip
    output_schema = SCHEMA
    key = "answer_id"
    partition_by = ("answerer",)
    config_key = "fakebench"  # the section is FakeBenchItems' (FakeBenchConfig)
    gather = True

    @property
    def fcfg(self) -> FakeBenchConfig:
        return self.cfg

    def model_config(self, m: ResponderConfig) -> dict[str, Any]:
        return {
            "model": fingerprint(m, list(ANSWER_TEMPLATES), self.fcfg.prompts_dir),
            "templates": template_hashes(list(ANSWER_TEMPLATES), self.fcfg.prompts_dir),
        }

    def stage_config(self) -> Any:
        return [self.model_config(m) for m in self.fcfg.models]

    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        items = [u for u in upstream if u.stage == "fakebench_items"]
        if not self.fcfg.enabled or not items:
            return []
        splits = [u for u in upstream if u.stage == "splits"]
        return [
            self.spec(m.name, {"answerer": m.name},
                      [*splits, *items] if trains(m) else items,
                      {"answerer": m.name}, config=self.model_config(m))
            for m in self.fcfg.models
        ]  # fmt: skip

    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        return read_tagged(self, shard)

    @staticmethod
    def reasons(it: dict[str, Any]) -> bool:
        """FakeClue in inference mode: chain of thought, then a verdict to parse."""
        return it["task"] == "fakeclue" and it.get("form") != "fault_finding"

    @staticmethod
    def ident(m: ResponderConfig, it: dict[str, Any]) -> dict[str, Any]:
        """The columns that say whose answer to which item a row is."""
        return {
            "answer_id": f"{m.name}/{it['item_id']}",
            "answerer": m.name,
            **{k: it[k] for k in ("item_id", "task", "sample_id", "label")},
        }

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        assert shard is not None
        m = next(x for x in self.fcfg.models if x.name == shard.params["answerer"])
        rows = batch.to_pylist()
        items = sorted(
            (r for r in rows if r["input"] == "fakebench_items"), key=lambda r: r["item_id"]
        )
        train = [r for r in rows if r["input"] == "splits" and r["split"] == "train"]
        questions = [
            Question(
                qid=f"{m.name}/{it['item_id']}",
                item=it,
                key=it["sample_id"],
                template=CLUE_TEMPLATE if self.reasons(it) else TEMPLATE[it["task"]],
                prompts_dir=self.fcfg.prompts_dir,
                variables={"question": it["question"]},
                unreadable=_unreadable if self.reasons(it) else None,
            )
            for it in items
        ]
        got = respond(self, m, questions, train)
        if got.rows is not None:  # official answer files: the release's reader wrote the rows
            out = got.rows
        else:
            out = []
            for q in questions:
                a, ident = got.by_qid[q.qid], self.ident(m, q.item)
                if not a.ok:
                    out.append({**ident, **a.error_fields()})
                    continue
                out.extend(render(self, ident, self.answer_row, ident, q.item, a))
        for r in out:
            r.setdefault("status", "ok")
            r["stage_version"] = self.version
        return self.to_table(out)

    def answer_row(self, ident: dict[str, Any], it: dict[str, Any], a: Answer) -> dict[str, Any]:
        """One item's row from an answer: the detector's measurement, a constant's belief in the
        question's form, or a model's reply (its reasoning and verdict read when it reasons)."""
        if a.detection is not None:
            return {**ident, **self.detector_answer(it, a.detection), **a.trace}
        if a.reply is None and a.verdict is not None:  # a constant: the belief, no clue named
            reply: str | None = constant_reply(
                a.verdict, it["task"], it.get("form"), it["question"]
            )
        else:
            reply = a.reply
        row = {**ident, **a.trace, "reply": reply}
        if self.reasons(it):
            p = parse_answer(reply)
            row.update(response=p.reasoning or reply, verdict=p.answer, parse_error=p.reason)
        else:
            row.update(response=reply, verdict=None, parse_error=None)
        row["null_reason"] = None
        return row

    def detector_answer(self, it: dict[str, Any], found: Detection) -> dict[str, Any]:
        """reply / response / verdict / null_reason of one item from one measurement."""
        return {"verdict": None, "parse_error": None, "null_reason": None,
                **self._detector_answer(it, found)}  # fmt: skip

    def _detector_answer(self, it: dict[str, Any], found: Detection) -> dict[str, Any]:
        if it["task"] == "fakeclass":  # the decision in the question's form (§3.2)
            reply = constant_reply(found.answer, "fakeclass", it.get("form"), it["question"])
            return {"reply": reply, "response": reply}
        if it["task"] == "fakeclue" and self.reasons(it):  # reasoning, then the verdict
            p = parse_answer(found.reply)
            return {"reply": found.reply, "response": p.reasoning, "verdict": p.answer,
                    "parse_error": p.reason}  # fmt: skip
        if it["task"] == "fakeclue":  # fault-finding: what it measured, no verdict asked
            return {"reply": found.reasoning, "response": found.reasoning}
        text, why = detector_qa(it.get("dimension") or "", found)
        return {"reply": text, "response": text, "null_reason": why}
