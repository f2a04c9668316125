"""detections: every configured detector's answer and explanation for every eval item, per track.

The XPlainVerse protocol (App. 16): each detector sees one image of an ID or OOD evaluation set
and answers ``<reasoning>…</reasoning><answer>real|fake</answer>``, once per explanation track
(``complex``: detailed forensic reasoning; ``simple``: short and jargon-free). One row per eval
item per detector per track. A gathering stage: planned once the evaluation sets are drawn, one
shard per (detector, eval set) in the ``detector=`` partition (shard id = the eval set), except
``file`` detectors, whose one file is read once for both sets (shard id ``sets``).

Detector kinds (``evaluation.detectors``):

- ``offline``: ``ForensicDetector`` trained on a seeded draw of ``train_per_class`` real and
  fake samples of the train split (their blobs read from the store), cached per process by a
  training fingerprint so the id and ood shards train once per worker. Its ``explain()`` gives
  the answer, the fake probability, the grounded region (``bbox`` as JSON) and the complex
  track's reasoning; the simple track gets a shorter plain-language sentence made here from the
  same measured region (where it is, smoother or grainier than the rest), so both tracks state
  only what was measured.
- ``vlm``: a model pool, one request per eval item per track with the paper's exact prompt
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
  ``evaluation.perturbations``).

Every row carries its eval item's ``variant`` (propagation level "0x" … "3x", or a catalogue
perturbation "<family>:<severity>"), error rows included, so the scores can be split by it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from forenset.backends.llm.types import ChatRequest
from forenset.benchmarks.common.answers import LABELS, format_reply, parse_answer
from forenset.benchmarks.common.predictions import file_digest, read_predictions
from forenset.benchmarks.common.responders import DetectorConfig
from forenset.benchmarks.common.training import trained_detector, training_draw
from forenset.benchmarks.evaluation.config import EvaluationConfig
from forenset.benchmarks.evaluation.schemas.detections import SCHEMA
from forenset.confbase import fingerprint_view
from forenset.errors import ConfigurationError
from forenset.images import decode_rgb
from forenset.seeds import derive_seed
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import (
    ContractError,
    ShardSpec,
    Stage,
    StageRowError,
    describe,
    writable,
)
from forenset.tasks.modelcall import (
    Outcome,
    call_validated,
    feedback,
    request,
    template_hashes,
)
from forenset.tasks.strategy import ModelStrategy

if TYPE_CHECKING:  # scikit-learn stays unloaded until a detector trains
    from forenset.benchmarks.common.detector import Detection, ForensicDetector

TEMPLATES = {"complex": "detect_complex", "simple": "detect_simple"}
FILE_SHARD = "sets"  # a file detector's one shard covers both evaluation sets


def detector_config(d: DetectorConfig) -> dict[str, Any]:
    """What of one detector shapes its rows: its fingerprinted fields, plus the templates'
    content for a model and the file's content for a predictions file."""
    view = fingerprint_view(d)
    if d.kind == "vlm":
        view["templates"] = template_hashes(list(TEMPLATES.values()), None)
    if d.kind == "file" and d.path:
        view["file_sha256"] = file_digest(d.path)
    return view


class Detections(Stage[EvaluationConfig]):
    name = "detections"
    version = "2"
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

    def detector(self, name: str) -> DetectorConfig:
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
                ins = [*splits, s] if d.kind == "offline" else [s]
                out.append(self.spec(es, part, ins, {"detector": d.name, "eval_set": es}))
        return out

    # -- reading -------------------------------------------------------------------------
    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        """Each input's declared columns, tagged with the stage they came from (``input``)."""
        tables = []
        for info in shard.inputs:
            one = ShardSpec(shard.stage, shard.shard_id, shard.partition, [info], shard.params)
            t = super().read_inputs(one)
            tables.append(
                t.append_column("input", pa.array([info.stage] * t.num_rows, pa.string()))
            )
        if not tables:
            return pa.table({"input": pa.array([], pa.string())})
        return pa.concat_tables(tables, promote_options="permissive")

    # -- processing ------------------------------------------------------------------------
    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        assert shard is not None
        d = self.detector(shard.params["detector"])
        rows = batch.to_pylist()
        items = sorted(
            (r for r in rows if r["input"] == "eval_sets"), key=lambda r: r["eval_item_id"]
        )
        if d.kind == "offline":
            train = [r for r in rows if r["input"] == "splits" and r["split"] == "train"]
            out = self.offline(d, items, train)
        elif d.kind == "vlm":
            out = VlmDetection(self, d).run_items(items)
        else:
            out = self.from_file(d, items)
        for r in out:
            r.setdefault("status", "ok")
            r.setdefault("stage_version", self.version)
        return self.to_table(out)

    def base(self, d: DetectorConfig, item: dict[str, Any], track: str) -> dict[str, Any]:
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

    def failed(
        self, d: DetectorConfig, item: dict[str, Any], message: str, retryable: bool
    ) -> list[dict[str, Any]]:
        """An eval item's error rows, one per track."""
        return [
            {**self.base(d, item, t), "status": "error", "error": message, "retryable": retryable}
            for t in self.ecfg.tracks
        ]

    # -- offline ---------------------------------------------------------------------------
    def offline(
        self, d: DetectorConfig, items: list[dict[str, Any]], train: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        try:
            det = self.trained(d, train)
        except StageRowError as e:
            return [r for it in items for r in self.failed(d, it, str(e), e.retryable)]
        out: list[dict[str, Any]] = []
        for it in items:
            t0 = time.perf_counter()
            try:
                rows = self.offline_rows(d, det, it)
            except (ConfigurationError, ContractError):
                raise
            except Exception as e:  # noqa: BLE001 - one bad image must not fail the shard
                rows = self.failed(d, it, describe(e), True)
            for r in rows:
                r["elapsed_ms"] = (time.perf_counter() - t0) * 1000 / len(rows)
            out.extend(rows)
        return out

    def training_draw(self, d: DetectorConfig, train: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return training_draw(self.ctx.seed, d, train)

    def trained(self, d: DetectorConfig, train: list[dict[str, Any]]) -> ForensicDetector:
        return trained_detector(self.ctx, d, train)

    def offline_rows(
        self, d: DetectorConfig, det: ForensicDetector, item: dict[str, Any]
    ) -> list[dict[str, Any]]:
        found = det.explain(decode_rgb(self.ctx.store.get_blob(item["blob"])))
        bbox = json.dumps(found.bbox) if found.bbox is not None else None
        out = []
        for track in self.ecfg.tracks:
            reasoning = found.reasoning if track == "complex" else simple_text(found)
            out.append(
                {
                    **self.base(d, item, track),
                    "answer": found.answer,
                    "parse_error": None,
                    "explanation": reasoning,
                    "fake_probability": found.p_fake,
                    "bbox": bbox,
                    "reply": found.reply
                    if track == "complex"
                    else format_reply(reasoning, found.answer),
                    "backend": found.backend,
                    "model": found.model,
                }
            )
        return out

    # -- file --------------------------------------------------------------------------------
    def from_file(self, d: DetectorConfig, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        assert d.path
        preds, problems = read_predictions(d.path, {it["sample_id"] for it in items})
        name = Path(d.path).name
        out: list[dict[str, Any]] = []
        for it in items:
            p = preds.get(it["sample_id"])
            for track in self.ecfg.tracks:
                row = {**self.base(d, it, track), "fake_probability": None, "bbox": None}
                row.update(backend="file", model=name)
                if p is None:
                    row.update(
                        answer=None,
                        parse_error=f"no prediction in {name} for this sample",
                        explanation=None,
                        reply=None,
                    )
                else:
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
                    row.update(
                        answer=None if bad else answer,
                        parse_error=bad,
                        explanation=expl,
                        reply=p["raw"],
                    )
                out.append(row)
        for cls, sentence in problems.items():
            out.append(
                {
                    "detection_id": f"{d.name}/file-problem/{cls}",
                    "detector": d.name,
                    "backend": "file",
                    "model": name,
                    "status": "error",
                    "error": writable(sentence),
                    "retryable": False,
                }
            )
        return out


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


# -- vlm ---------------------------------------------------------------------------------------


def _no_check(parsed: Any) -> list[str]:
    """Replies are free text (no response model): the answer parser, not a validator, reads them."""
    return []


class VlmDetection(ModelStrategy["Detections", EvaluationConfig]):
    """One request per eval item per track through ``call_validated`` (one run_chat per round),
    the reply kept as text and parsed by ``parse_answer``."""

    def __init__(self, stage: Detections, d: DetectorConfig):
        self.stage = stage
        self.d = d

    def run_items(self, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        st: Detections = self.stage
        tracks = st.ecfg.tracks
        out: list[dict[str, Any]] = []
        reqs = []
        for it in items:
            try:
                image = st.ctx.store.get_blob(it["blob"])
            except Exception as e:  # noqa: BLE001 - one missing blob must not fail the shard
                out.extend(st.failed(self.d, it, describe(e), True))
                continue
            for track in tracks:
                base = st.base(self.d, it, track)
                req = request(
                    "detections",
                    base["detection_id"],
                    TEMPLATES[track],
                    None,
                    images=[image],
                    response_model=None,  # the reply is free text
                )
                reqs.append((it, base, req))
        outcomes = self.ask([r for _, _, r in reqs])
        for it, base, req in reqs:
            o = outcomes[req.item_id]
            if not o.result.ok:
                out.append({**base, **o.trace(), "reply": o.result.text or None})
                continue
            out.extend(self.convert({**it, **base}, o, partial(self.row, base, o)))
        return out

    def ask(self, reqs: list[ChatRequest]) -> dict[str, Outcome]:
        """Each request's last outcome. With ``max_attempts`` above 1, a reply the parser
        cannot read is asked again (its reason appended, a new seed), and the last reply
        counts; the default 1 keeps the paper's zero-shot rule (unparseable = wrong)."""
        st: Detections = self.stage
        assert self.d.llm is not None
        original = {r.item_id: r for r in reqs}
        final: dict[str, Outcome] = {}
        pending = list(reqs)
        for attempt in range(1, self.d.max_attempts + 1):
            if not pending:
                break
            got = call_validated(st.ctx, st.name, self.d.llm, [(r, _no_check) for r in pending], 1)
            nxt = []
            for req in pending:
                o, prev = got[req.item_id], final.get(req.item_id)
                if prev is not None:
                    o.input_tokens += prev.input_tokens
                    o.output_tokens += prev.output_tokens
                    o.cost_usd += prev.cost_usd
                    o.cached = o.cached and prev.cached
                o.attempts = attempt
                final[req.item_id] = o
                reason = parse_answer(o.result.text).reason if o.result.ok else None
                if reason and attempt < self.d.max_attempts:
                    first = original[req.item_id]
                    seed = derive_seed(st.ctx.seed, st.name, req.item_id, "regenerate")
                    nxt.append(feedback(first, first.user, [reason], attempt, seed))
            pending = nxt
        return final

    def row(self, base: dict[str, Any], o: Any) -> dict[str, Any]:
        text = o.result.text
        parsed = parse_answer(text)
        return {
            **base,
            **o.trace(),
            "answer": parsed.answer,
            "parse_error": parsed.reason,
            "explanation": parsed.reasoning,
            "fake_probability": None,
            "bbox": None,
            "reply": text,
        }
