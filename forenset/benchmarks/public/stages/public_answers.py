"""public_answers: every evaluated model's reply to every imported item.

A gathering stage, one shard per model (``public.models``, partition ``answerer``). The model
is a responder (``common.responders``), run by ``common.respond`` with per-item error isolation:

* ``llm``: one request per item, template ``public_question`` (the item's question as the
  release words it), the item's images attached in order (LOKI's multiple choice shows two);
  replies are cached by the LLM layer's response cache, so a rebuild asks nothing again;
* ``constant``: the floor, no call: every image judged ``answer``, the first option chosen, no
  clue named (``replies.constant_reply``);
* ``file``: replies written elsewhere (JSONL/CSV ``sample_id, answer, explanation``) where
  ``sample_id`` is the item_id: the verdict or letter is read from ``answer``, the explanation
  from ``explanation``; an item without a line is an error row saying so.

Every reply is read by one rule (``public.formats.replies``): the verdict of a judgement, the letter of
a multiple choice, the text scored as the explanation; ``parse_error`` says why none could be
read (scored as wrong).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from forenset.benchmarks.common.respond import (
    Answer,
    Question,
    fingerprint,
    render,
    respond,
)
from forenset.benchmarks.common.responders import ResponderConfig
from forenset.benchmarks.public.config import TEMPLATE, PublicConfig
from forenset.benchmarks.public.formats import replies
from forenset.benchmarks.public.schemas.public_answers import SCHEMA
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage
from forenset.tasks.modelcall import template_hashes


class PublicAnswers(Stage[PublicConfig]):
    name = "public_answers"
    version = "1"
    inputs = ("public_items",)
    input_columns = (
        "item_id", "benchmark", "task", "question", "choices", "asks", "blobs",
    )  # fmt: skip
    output_schema = SCHEMA
    key = "answer_id"
    partition_by = ("answerer",)
    config_key = "public"
    gather = True

    @property
    def pcfg(self) -> PublicConfig:
        return self.cfg

    def model_config(self, m: ResponderConfig) -> dict[str, Any]:
        return {
            "model": fingerprint(m, [TEMPLATE], self.pcfg.prompts_dir),
            "templates": template_hashes([TEMPLATE], self.pcfg.prompts_dir),
        }

    def stage_config(self) -> Any:
        return [self.model_config(m) for m in self.pcfg.models]

    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        items = [u for u in upstream if u.stage == "public_items"]
        if not self.pcfg.enabled or not items:
            return []
        return [
            self.spec(m.name, {"answerer": m.name}, items, {"answerer": m.name},
                      config=self.model_config(m))
            for m in self.pcfg.models
        ]  # fmt: skip

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        assert shard is not None
        m = next(x for x in self.pcfg.models if x.name == shard.params["answerer"])
        items = sorted(batch.to_pylist(), key=lambda r: r["item_id"])
        questions = [
            Question(
                qid=f"{m.name}/{it['item_id']}",
                item={**it, "blob": (it["blobs"] or [None])[0]},  # one-image responders read it
                key=it["item_id"],
                template=TEMPLATE,
                prompts_dir=self.pcfg.prompts_dir,
                variables={"question": it["question"]},
            )
            for it in items
        ]
        got = respond(self, m, questions)
        out: list[dict[str, Any]] = []
        for key, problem in got.problems:  # a file's lines that are not records
            out.append({"answer_id": f"{m.name}/file-problem/{key}", "answerer": m.name,
                        "status": "error", "error": problem, "retryable": False})  # fmt: skip
        for q in questions:
            a = got.by_qid[q.qid]
            ident = {"answer_id": q.qid, "answerer": m.name,
                     **{k: q.item[k] for k in ("item_id", "benchmark", "task")}}  # fmt: skip
            if a.missing:
                out.append({**ident, **a.trace, "status": "error", "retryable": False,
                            "error": f"{a.trace.get('model', 'the file')} has no line for this item"})  # fmt: skip
            elif not a.ok:
                out.append({**ident, **a.error_fields()})
            else:
                out.extend(render(self, ident, self.answer_row, ident, q.item, a))
        for r in out:
            r.setdefault("status", "ok")
            r["stage_version"] = self.version
        return self.to_table(out)

    @staticmethod
    def answer_row(ident: dict[str, Any], it: dict[str, Any], a: Answer) -> dict[str, Any]:
        """One item's row: the reply read by ``public.formats.replies``."""
        task = it["task"]
        if a.reply is None and a.verdict is not None:  # a constant: its belief, worded
            reply: str | None = replies.constant_reply(a.verdict, task, it.get("asks"))
            said, text = reply or "", reply or ""
        elif a.record:  # a file line: the stated answer and explanation
            reply = a.reply
            said, text = str(a.verdict or ""), str(a.explanation or "")
        else:
            reply = a.reply
            said, text = reply or "", replies.explanation(reply)
        row = {**ident, **a.trace, "reply": reply, "explanation": text, "verdict": None,
               "choice": None, "parse_error": None}  # fmt: skip
        if task == "judgement":
            row["verdict"], row["parse_error"] = replies.verdict(said, it.get("asks"))
        elif task == "multiple_choice":
            row["choice"], row["parse_error"] = replies.choice(said, list(it.get("choices") or []))
        return row
