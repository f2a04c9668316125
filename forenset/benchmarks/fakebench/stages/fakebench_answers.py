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
``detections`` and the reward family's ``detector`` policy train it (``Detections.trained``: a
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

A failed call is an error row (retried on resume); a reply without a readable verdict keeps its
reasoning and says why in ``parse_error``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from forenset.benchmarks.common.answers import parse_answer
from forenset.benchmarks.common.forensic import MEASURE_WORDS
from forenset.benchmarks.common.reads import read_tagged
from forenset.benchmarks.common.responders import DetectorConfig
from forenset.benchmarks.common.training import trained_detector
from forenset.benchmarks.fakebench import text as fb
from forenset.benchmarks.fakebench.config import ANSWER_TEMPLATES, FakeBenchConfig, FakeBenchModel
from forenset.benchmarks.fakebench.official import ANSWER_FILES, answer_rows, files_digest
from forenset.benchmarks.fakebench.official import Q_FAKE as OFFICIAL_Q_FAKE
from forenset.benchmarks.fakebench.schemas.fakebench_answers import SCHEMA
from forenset.confbase import fingerprint_view
from forenset.errors import ConfigurationError
from forenset.images import decode_rgb
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ContractError, ShardSpec, Stage, StageRowError, describe, writable
from forenset.tasks.modelcall import call_validated, request, template_hashes

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


def _no_check(parsed: Any) -> list[str]:
    """Replies are free text: the scorer reads them, no validator rejects them."""
    return []


class FakeBenchAnswers(Stage[FakeBenchConfig]):
    name = "fakebench_answers"
    version = "2"
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

    def model_config(self, m: FakeBenchModel) -> dict[str, Any]:
        out = {
            "model": fingerprint_view(m),
            "templates": template_hashes(list(ANSWER_TEMPLATES), self.fcfg.prompts_dir),
        }
        if m.kind == "official" and m.answers:  # the replies are the files' content
            out["answers_sha256"] = files_digest(m.answers, list(ANSWER_FILES.values()))
        return out

    def stage_config(self) -> Any:
        return [self.model_config(m) for m in self.fcfg.models]

    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        items = [u for u in upstream if u.stage == "fakebench_items"]
        if not self.fcfg.enabled or not items:
            return []
        splits = [u for u in upstream if u.stage == "splits"]
        return [
            self.spec(m.name, {"answerer": m.name},
                      [*splits, *items] if m.kind == "detector" else items,
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
    def ident(m: FakeBenchModel, it: dict[str, Any]) -> dict[str, Any]:
        """The columns that say whose answer to which item a row is."""
        return {
            "answer_id": f"{m.name}/{it['item_id']}",
            "answerer": m.name,
            "item_id": it["item_id"],
            "task": it["task"],
            "sample_id": it["sample_id"],
            "label": it["label"],
        }

    def constant(self, m: FakeBenchModel, it: dict[str, Any]) -> dict[str, Any]:
        """The offline reference's row (``kind: constant``)."""
        reply = constant_reply(m.belief, it["task"], it.get("form"), it["question"])
        p = parse_answer(reply) if self.reasons(it) else None
        return {
            **self.ident(m, it),
            "reply": reply,
            "response": p.reasoning if p else reply,
            "verdict": p.answer if p else None,
            "parse_error": p.reason if p else None,
            "null_reason": None,
            "backend": "offline",
            "model": f"constant-{m.belief}",
            "status": "ok",
            "stage_version": self.version,
        }

    def detector(
        self, m: FakeBenchModel, items: list[dict[str, Any]], train: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The offline forensic detector's rows: trained once (shared with ``detections``), each
        image explained once, every item answered from that one measurement."""
        d = DetectorConfig(name=m.name, classifier=m.classifier, train_per_class=m.train_per_class)
        bases = [self.base(m, it) for it in items]
        try:
            det = trained_detector(self.ctx, d, train)
        except StageRowError as e:
            return [{**b, "status": "error", "error": writable(str(e)),
                     "retryable": e.retryable} for b in bases]  # fmt: skip
        seen: dict[str, Detection | str] = {}
        out = []
        for it, base in zip(items, bases, strict=True):
            if it["blob"] not in seen:
                try:
                    seen[it["blob"]] = det.explain(decode_rgb(self.ctx.store.get_blob(it["blob"])))
                except (ConfigurationError, ContractError):
                    raise
                except Exception as e:  # noqa: BLE001 - one bad image must not fail the shard
                    seen[it["blob"]] = describe(e)
            found = seen[it["blob"]]
            if isinstance(found, str):
                out.append({**base, "status": "error", "error": writable(found),
                            "retryable": True})  # fmt: skip
                continue
            out.append({**base, **self.detector_answer(it, found),
                        "backend": found.backend, "model": found.model})  # fmt: skip
        return out

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

    @staticmethod
    def base(m: FakeBenchModel, it: dict[str, Any]) -> dict[str, Any]:
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
        if m.kind == "constant":
            return self.to_table([self.constant(m, it) for it in items])
        if m.kind == "official":  # replies read from the release's answer files
            assert m.answers is not None  # validated
            got = answer_rows(m.name, m.answers, items)
            for r in got:
                r["stage_version"] = self.version
            return self.to_table(got)
        if m.kind == "detector":
            train = [r for r in rows if r["input"] == "splits" and r["split"] == "train"]
            out = self.detector(m, items, train)
            for r in out:
                r.setdefault("status", "ok")
                r["stage_version"] = self.version
            return self.to_table(out)
        out: list[dict[str, Any]] = []
        reqs = []
        for it in items:
            base = self.ident(m, it)
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
                response_model=None,  # free text
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
                               parse_error=p.reason, null_reason=None)  # fmt: skip
                else:
                    row.update(response=text, verdict=None, parse_error=None, null_reason=None)
            out.append(row)
        for r in out:
            r["stage_version"] = self.version
        return self.to_table(out)
