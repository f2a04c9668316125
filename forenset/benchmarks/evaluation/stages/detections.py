"""detections: every configured detector's answer and explanation for every eval item, per track.

The XPlainVerse protocol (App. 16): each detector sees one image of an ID or OOD evaluation set
and answers ``<reasoning>…</reasoning><answer>real|fake</answer>``, once per explanation track
(``complex``: detailed forensic reasoning; ``simple``: short and jargon-free). One row per eval
item per detector per track. A gathering stage: planned once the evaluation sets are drawn, one
shard per (detector, eval set) in the ``detector=`` partition (shard id = the eval set), except
``file`` detectors, whose one file is read once for both sets (shard id ``sets``).

Detector kinds (``evaluation.detectors``, responders: ``forenset.benchmarks.common.responders``,
run by ``common.respond``; old names ``offline`` / ``vlm`` still read):

- ``detector`` (``offline``): ``ForensicDetector`` trained on a seeded draw of ``train_per_class`` real and
  fake samples of the train split (their blobs read from the store), cached per process by a
  training fingerprint so the id and ood shards train once per worker. Its ``explain()`` gives
  the answer, the fake probability, the grounded region (``bbox`` as JSON) and the complex
  track's reasoning; the simple track gets a shorter plain-language sentence made here from the
  same measured region (where it is, smoother or grainier than the rest), so both tracks state
  only what was measured.
- ``llm`` (``vlm``): a model pool, one request per eval item per track with the paper's exact prompt
  (templates ``detect_complex`` / ``detect_simple``), the image attached, parsed by
  ``parse_answer``. An unparseable reply is an ok row with ``answer`` null and ``parse_error``
  the parser's sentence (a wrong prediction, not an error); a failed call is an error row.
- ``file``: predictions of the user's own model, JSONL or CSV with ``sample_id, answer,
  explanation[, simple_explanation]`` (the simple track uses ``explanation`` when a line has no
  ``simple_explanation``). Problems are never dropped silently: each class of problem (lines
  that are not records, missing fields, text that is not UTF-8, ids in no evaluation set,
  repeated ids) is one error row of the shard with a count and examples, so ``forenset status``
  counts them and the table shows the sentence; the good lines are used, and an eval item
  without a prediction gets ``answer`` null with ``parse_error`` "no prediction in <file> for
  this sample". A predictions file names samples, not propagation variants: a sample's one
  prediction is used for each of its variants (``evaluation.propagation`` and
  ``evaluation.perturbations``). An XDD submission zip (``path: sub.zip``) is read by the
  challenge scorer's rules instead: a row needs only its id, a missing ``pred_label`` is no
  answer and a missing explanation no text of that track (never the other track's).
- a plugin responder (``forenset.responders``): its reply text is read as a model's is.

Every row carries its eval item's ``variant`` (propagation level "0x" … "3x", or a catalogue
perturbation "<family>:<severity>"), error rows included, so the scores can be split by it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from forenset.benchmarks.common.answers import LABELS, format_reply, parse_answer
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
from forenset.benchmarks.evaluation.config import EvaluationConfig
from forenset.benchmarks.evaluation.schemas.detections import SCHEMA
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage, writable

if TYPE_CHECKING:  # scikit-learn stays unloaded until a detector trains
    from forenset.benchmarks.common.detector import Detection

TEMPLATES = {"complex": "detect_complex", "simple": "detect_simple"}
FILE_SHARD = "sets"  # a file detector's one shard covers both evaluation sets


def detector_config(d: ResponderConfig) -> dict[str, Any]:
    """What of one detector shapes its rows: its fingerprinted fields, plus the templates'
    content for a model and the file's content for a predictions file."""
    return fingerprint(d, list(TEMPLATES.values()), None)


def _unreadable(text: str) -> str | None:
    return parse_answer(text).reason


class Detections(Stage[EvaluationConfig]):
    name = "detections"
    version = "3"  # 3: the offline detector trains class-balanced
    inputs = ("splits", "eval_sets")
    input_columns = {
        "splits": ("sample_id", "label", "split", "blob"),  # the offline detector's training
        "eval_sets": ("eval_item_id", "eval_set", "sample_id", "variant", "label", "blob"),
    }
    output_schema = SCHEMA
    key = "detection_id"
    partition_by = ("detector",)
    config_key = "evaluation"  # the section is EvalSets' (EvaluationConfig)
    gather = True

    @property
    def ecfg(self) -> EvaluationConfig:
        return self.cfg

    def stage_config(self) -> Any:
        """Detectors and tracks (scorers belong to the scoring stage; the eval-set fields reach
        this stage through the eval_sets shards' fingerprints)."""
        c = self.ecfg
        return {"tracks": list(c.tracks), "detectors": [detector_config(d) for d in c.detectors]}

    def detector(self, name: str) -> ResponderConfig:
        return next(d for d in self.ecfg.detectors if d.name == name)

    def spec(
        self,
        shard_id: str,
        partition: dict[str, str],
        inputs: list[ShardInfo],
        params: dict[str, Any],
        config: Any = None,
    ) -> ShardSpec:
        """A detector's shard is fingerprinted by that detector only (and the tracks), so
        adding or changing one detector leaves the others' rows alone."""
        if "detector" not in params:
            return super().spec(shard_id, partition, inputs, params, config)
        d = self.detector(params["detector"])
        own = {"tracks": list(self.ecfg.tracks), "detector": detector_config(d)}
        return super().spec(shard_id, partition, inputs, params, config=own)

    # -- planning ------------------------------------------------------------------------
    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        c = self.ecfg
        sets = [i for i in upstream if i.stage == "eval_sets"]
        if not c.enabled or not sets or not c.tracks:
            return []
        splits = [i for i in upstream if i.stage == "splits"]
        out = []
        for d in c.detectors:
            part = {"detector": d.name}
            if d.kind == "file":
                out.append(self.spec(FILE_SHARD, part, sets, {"detector": d.name}))
                continue
            for s in sets:
                es = s.partition.get("eval_set", s.shard_id)
                ins = [*splits, s] if trains(d) else [s]
                out.append(self.spec(es, part, ins, {"detector": d.name, "eval_set": es}))
        return out

    # -- reading -------------------------------------------------------------------------
    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        """Each input's declared columns, tagged with the stage they came from (``input``)."""
        return read_tagged(self, shard)

    # -- processing ------------------------------------------------------------------------
    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        assert shard is not None
        d = self.detector(shard.params["detector"])
        rows = batch.to_pylist()
        items = sorted(
            (r for r in rows if r["input"] == "eval_sets"), key=lambda r: r["eval_item_id"]
        )
        train = [r for r in rows if r["input"] == "splits" and r["split"] == "train"]
        questions = [
            Question(
                qid=self.base(d, it, track)["detection_id"],
                item={**it, "track": track},
                key=it["sample_id"],
                template=TEMPLATES[track],
                unreadable=_unreadable,
            )
            for it in items
            for track in self.ecfg.tracks
        ]
        got = respond(self, d, questions, train)
        out: list[dict[str, Any]] = []
        for q in questions:
            a = got.by_qid[q.qid]
            base = self.base(d, q.item, q.item["track"])
            if not a.ok:
                out.append({**base, **a.error_fields(), "elapsed_ms": self._ms(a)})
                continue
            out.extend(render(self, base, self.row, d, base, a))
        for key, sentence in got.problems:
            out.append(
                {
                    "detection_id": f"{d.name}/file-problem/{key}",
                    "detector": d.name,
                    "backend": got.backend,
                    "model": got.model,
                    "status": "error",
                    "error": writable(sentence),
                    "retryable": False,
                }
            )
        for r in out:
            r.setdefault("status", "ok")
            r.setdefault("stage_version", self.version)
        return self.to_table(out)

    def _ms(self, a: Answer) -> float | None:
        """An answer's time per row (one answer serves every track)."""
        return None if a.elapsed_ms is None else a.elapsed_ms / max(1, len(self.ecfg.tracks))

    def base(self, d: ResponderConfig, item: dict[str, Any], track: str) -> dict[str, Any]:
        return {
            "detection_id": f"{d.name}/{track}/{item['eval_item_id']}",
            "detector": d.name,
            "track": track,
            "eval_item_id": item["eval_item_id"],
            "eval_set": item["eval_set"],
            "sample_id": item["sample_id"],
            "variant": item.get("variant") or "0x",
            "label": item["label"],
        }

    def row(self, d: ResponderConfig, base: dict[str, Any], a: Answer) -> dict[str, Any]:
        """One track's row from an answer: a detector's measurement, a file's line, or a reply
        to parse."""
        track = base["track"]
        if a.detection is not None:
            found = a.detection
            reasoning = found.reasoning if track == "complex" else simple_text(found)
            return {
                **base,
                "answer": found.answer,
                "parse_error": None,
                "explanation": reasoning,
                "fake_probability": found.p_fake,
                "bbox": json.dumps(found.bbox) if found.bbox is not None else None,
                "reply": found.reply
                if track == "complex"
                else format_reply(reasoning, found.answer),
                "backend": found.backend,
                "model": found.model,
                "elapsed_ms": self._ms(a),
            }
        if d.kind == "file":
            return {**base, **self.from_file(a, track), "fake_probability": None, "bbox": None,
                    **a.trace}  # fmt: skip
        reply = a.reply
        if reply is None and a.verdict in LABELS:  # a verdict and explanation, no reply text
            reply = format_reply(a.explanation or "", str(a.verdict))
        parsed = parse_answer(reply or "")
        return {
            **base,
            **a.trace,
            "answer": parsed.answer,
            "parse_error": parsed.reason,
            "explanation": parsed.reasoning,
            "fake_probability": None,
            "bbox": None,
            "reply": reply,
        }

    @staticmethod
    def from_file(a: Answer, track: str) -> dict[str, Any]:
        """A predictions line's columns for one track (the simple track uses ``explanation``
        when the line has no ``simple_explanation``)."""
        name = a.trace["model"]
        if a.missing:
            return {"answer": None, "parse_error": f"no prediction in {name} for this sample",
                    "explanation": None, "reply": None}  # fmt: skip
        p = a.record
        if p.get("xdd"):  # a submission zip's row: the scorer's rules (xdd.format.as_predictions)
            return Detections.from_zip(p, track, name)
        expl = p["explanation"]
        if track == "simple" and p.get("simple_explanation"):
            expl = p["simple_explanation"]
        answer = str(p["answer"]).strip().strip(" \"'.*").lower()
        bad = (
            None
            if answer in LABELS
            else (
                f"the answer {str(p['answer'])!r} at line {p['line']} of {name} is "
                "neither 'real' nor 'fake'"
            )
        )
        return {"answer": None if bad else answer, "parse_error": bad, "explanation": expl,
                "reply": p["raw"]}  # fmt: skip

    @staticmethod
    def from_zip(p: dict[str, Any], track: str, name: str) -> dict[str, Any]:
        """A submission zip's row for one track, as the XDD scorer reads it: no (strict 0 / 1)
        label is no answer (a wrong prediction), a track without its explanation has none (it
        earns nothing, as the scorer's coverage gives it nothing)."""
        answer = p.get("answer")
        bad = None if answer in LABELS else f"no strict 0 / 1 pred_label in {name} for this id"
        expl = p.get("explanation" if track == "complex" else "simple_explanation")
        return {"answer": None if bad else answer, "parse_error": bad, "explanation": expl or None,
                "reply": p["raw"]}  # fmt: skip


def simple_text(found: Detection) -> str:
    """The simple track's explanation: one or two plain sentences from the same measured region
    as the complex one (no numbers, no jargon)."""
    if found.position is None:
        return (
            "The picture looks the same all over, with no part that stands out from the rest, "
            f"so it is judged {found.answer}."
        )
    smoother = found.evidence.get("noise", 0.0) < -1 or found.evidence.get("sharpness", 0.0) < -1
    look = "smoother and softer than" if smoother else "differently grainy from"
    if found.answer == "fake":
        return (
            f"The {found.position} of the picture looks {look} the rest of it, as if that part "
            "was changed or pasted in, so the picture is judged fake."
        )
    return (
        "The grain and sharpness look alike across the whole picture; the part that differs "
        f"most, in the {found.position}, is still within what a normal photo shows, so the "
        "picture is judged real."
    )
