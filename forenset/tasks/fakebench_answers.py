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

A failed call is an error row (retried on resume); a reply without a readable verdict keeps its
reasoning and says why in ``parse_error``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from forenset.backends.detectors.answers import parse_answer
from forenset.confbase import fingerprint_view
from forenset.schemas.fakebench_answers import SCHEMA
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage, describe, writable
from forenset.tasks.fakebench_items import ANSWER_TEMPLATES, FakeBenchConfig, FakeBenchModel
from forenset.tasks.modelcall import call_validated, request, template_hashes
from forenset.text import fakebench as fb

TEMPLATE = {t: "fakebench_question" for t in ("fakeclass", "fakeclue", "fakeqa")}
CLUE_TEMPLATE = "fakebench_inference"


def constant_reply(belief: str, task: str, form: str | None, question: str) -> str:
    """What a model that judges every image ``belief`` and names no clue replies."""
    if task == "fakeclass":
        if form == "yes_no":
            asks = "fake" if question == fb.Q_FAKE else "real"
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


def _no_check(parsed: Any) -> list[str]:
    """Replies are free text: the scorer reads them, no validator rejects them."""
    return []


class FakeBenchAnswers(Stage):
    name = "fakebench_answers"
    version = "1"
    inputs = ("fakebench_items",)
    input_columns = (
        "item_id", "task", "sample_id", "label", "blob", "form", "question",
    )  # fmt: skip
    output_schema = SCHEMA
    key = "answer_id"
    partition_by = ("answerer",)
    config_key = "fakebench"  # the section is FakeBenchItems' (FakeBenchConfig)
    gather = True

    @property
    def fcfg(self) -> FakeBenchConfig:
        return self.cfg

    def model_config(self, m: FakeBenchModel) -> dict[str, Any]:
        return {
            "model": fingerprint_view(m),
            "templates": template_hashes(list(ANSWER_TEMPLATES), self.fcfg.prompts_dir),
        }

    def stage_config(self) -> Any:
        return [self.model_config(m) for m in self.fcfg.models]

    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        if not self.fcfg.enabled or not upstream:
            return []
        return [
            self.spec(m.name, {"answerer": m.name}, upstream, {"answerer": m.name},
                      config=self.model_config(m))
            for m in self.fcfg.models
        ]  # fmt: skip

    @staticmethod
    def reasons(it: dict[str, Any]) -> bool:
        """FakeClue in inference mode: chain of thought, then a verdict to parse."""
        return it["task"] == "fakeclue" and it.get("form") != "fault_finding"

    def constant(self, m: FakeBenchModel, it: dict[str, Any]) -> dict[str, Any]:
        """The offline reference's row (``kind: constant``)."""
        reply = constant_reply(m.belief, it["task"], it.get("form"), it["question"])
        p = parse_answer(reply) if self.reasons(it) else None
        return {
            "answer_id": f"{m.name}/{it['item_id']}",
            "answerer": m.name,
            "item_id": it["item_id"],
            "task": it["task"],
            "sample_id": it["sample_id"],
            "label": it["label"],
            "reply": reply,
            "response": p.reasoning if p else reply,
            "verdict": p.answer if p else None,
            "parse_error": p.reason if p else None,
            "backend": "offline",
            "model": f"constant-{m.belief}",
            "status": "ok",
            "stage_version": self.version,
        }

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        assert shard is not None
        m = next(x for x in self.fcfg.models if x.name == shard.params["answerer"])
        items = sorted(batch.to_pylist(), key=lambda r: r["item_id"])
        if m.kind == "constant":
            return self.to_table([self.constant(m, it) for it in items])
        out: list[dict[str, Any]] = []
        reqs = []
        for it in items:
            base = {
                "answer_id": f"{m.name}/{it['item_id']}",
                "answerer": m.name,
                "item_id": it["item_id"],
                "task": it["task"],
                "sample_id": it["sample_id"],
                "label": it["label"],
            }
            try:
                image = self.ctx.store.get_blob(it["blob"])
            except Exception as e:  # noqa: BLE001 - one missing blob must not fail the shard
                out.append({**base, "status": "error", "error": writable(describe(e)),
                            "retryable": True})  # fmt: skip
                continue
            tpl = CLUE_TEMPLATE if self.reasons(it) else TEMPLATE[it["task"]]
            req = request(
                self.name,
                base["answer_id"],
                tpl,
                self.fcfg.prompts_dir,
                images=[image],
                response_model=None,  # type: ignore[arg-type] - free text
                question=it["question"],
            )
            reqs.append(({**base, "reasons": self.reasons(it)}, req))
        assert m.llm is not None  # kind llm (validated)
        chats = [(r, _no_check) for _, r in reqs]
        got = call_validated(self.ctx, self.name, m.llm, chats, 1) if chats else {}
        for base, req in reqs:
            o = got[req.item_id]
            reasons = base.pop("reasons")
            row = {**base, **o.trace(), "reply": o.result.text or None}
            if o.result.ok:
                text = o.result.text
                if reasons:
                    p = parse_answer(text)
                    row.update(response=p.reasoning or text, verdict=p.answer,
                               parse_error=p.reason)  # fmt: skip
                else:
                    row.update(response=text, verdict=None, parse_error=None)
            out.append(row)
        for r in out:
            r["stage_version"] = self.version
        return self.to_table(out)
