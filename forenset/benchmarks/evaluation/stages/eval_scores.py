"""eval_scores: Table 5 of the XPlainVerse protocol, per detector, track, eval set and group.

A gathering stage (planned once every detections, explanations and eval_sets shard is in), one
shard per eval set (``id`` / ``ood``). Each output row scores the items of one (detector, track,
eval set, group): ``group_kind`` ``all`` (the whole set, Table 5's cells), ``generator`` and
``generator_family`` (a fake's generator; the set's reals form the group ``real``) and
``variant`` (one group per propagation level, "0x" … "3x", reals and fakes together: the
detection scores of SafeIMG §3.4 under repeated re-sharing; ``evaluation.propagation``). The
``all``, ``generator`` and ``generator_family`` groups hold the clean items only (``0x``), so
Table 5's cells stay the paper's clean figures when propagation is on. Items perturbed by the
catalogue (``evaluation.perturbations``) are scored in three more group kinds only:
``perturbation`` (one group per family, all its severities), ``perturbation_severity`` (one per
family and severity, ``noise:0.5``) and ``severity`` (one per severity, all families); the
clean baseline of the same samples is the ``variant=0x`` group.

The table is long-format (``forenset.schemas.scores``): every metric of the ``evaluation``
family in the scorer registry (``forenset.benchmarks.common.scoring``) gives one row per group
with its value, n, a seeded bootstrap interval (``evaluation.intervals``) and a caveat when the
group is degenerate (one class only, n below ``intervals.min_n``).

Detection (§5, App. 16.0.0.5): binary F1 with fake as the positive class and accuracy, by
:func:`forenset.benchmarks.common.scorers.detection_scores`; an unparseable answer (``answer`` null) is a
wrong prediction. A group without a fake item has no F1 of the fake class: ``f1`` is null with
the reason (accuracy is still given). The confusion counts are in the rows' ``details``.
Detection *error* rows (a failed call, retried on resume) are not items: only ok rows are read.

Explanations (§4, App. 15): the detector's explanation of an item is scored against the
dataset's reference explanation of the same sample (``explanations`` table):

=========  ======================  ===========================
track      reference of a fake     reference of a real
=========  ======================  ===========================
complex    ``complex``             ``authenticity``
simple     ``simple``              ``authenticity``
=========  ======================  ===========================

With ``scorers.references: gold`` the references are the imported gold instead
(``gold_references``; its shards join this stage's inputs, so a new import recomputes the
scores), looked up by the item's track, not by the table above: each track is scored against
the gold text of its sample for that track (of several annotators', the first by annotator
name; all of them are used for the agreement). ``forenset import-gold`` (Label Studio) writes
complex texts of fakes only, so reals and the simple track have no reference then;
``forenset xdd-import-gold`` (an XDD reference JSONL) writes both tracks of every
explanation-scored record, reals included, as the challenge's scorer uses them.
Reals have one reference only (the dataset writes no simple authenticity text), so both tracks
use it; an item whose sample has no reference is left out of the explanation means and counted
in ``details.n_no_reference``. An item with no explanation (the detector gave none) earns no credit:
its prediction is the empty text, which BERTScore and EntityScore / EvidenceScore score 0 by
their own rules, and its SLE is 0 (the simplicity of nothing is not credited).

Metrics per track: complex = EntityScore, EvidenceScore, BERTScore-F1; simple = BERTScore-F1,
SLE (normalised, eq. 7–8). A metric outside its track has no row. Group values are means of
the items' scores (``forenset.benchmarks.evaluation.scorers.table5``). EntityScore / EvidenceScore come from the ``evaluator`` pool
when one is set, else from the offline phrase matcher (``phrase-match-v1``); BERTScore and SLE
load the local models named by ``bertscore_model`` / ``sle_model`` and are null with the reason
when unset. Every metric names the model and backend that computed it.

The stage has no config model of its own: it reads the ``evaluation:`` section (owned by
``eval_sets``); its fingerprint covers the ``scorers`` settings only (detector and track
settings reach it through the detections shards' fingerprints) and the ``intervals`` settings.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from forenset.benchmarks.common.scorers.types import Score, null_score
from forenset.benchmarks.common.scoring import score_rows, scorers
from forenset.benchmarks.evaluation.config import EVAL_SETS, EvaluationConfig
from forenset.benchmarks.evaluation.schemas.eval_scores import GROUP_FIELDS, SCHEMA
from forenset.confbase import fingerprint_view
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage

FAMILY = "evaluation"  # the scorer registry's family
GROUP_KINDS = (
    "all", "generator", "generator_family", "variant",
    "perturbation", "perturbation_severity", "severity",
)  # fmt: skip
PERTURBATION_KINDS = ("perturbation", "perturbation_severity", "severity")
REAL_GROUP = "real"
GOLD_TABLE = "gold_references"  # written by forenset import-gold (not a stage)


def reference_kind(track: str, label: str) -> str:
    """The kind of ``explanations`` row an item of ``track`` with truth ``label`` is scored
    against (module doc)."""
    return "authenticity" if label == "real" else track


def group_of(item: dict[str, Any], kind: str) -> str | None:
    """The group of ``item`` of this kind; None when the item is not in any group of it
    (propagated and perturbed copies are only in their own kinds, clean items only outside
    the perturbation kinds)."""
    family = item.get("perturbation_family")
    if kind in PERTURBATION_KINDS:
        if not family:
            return None
        sev = f"{float(item['severity']):g}"
        return {"perturbation": family, "severity": sev}.get(kind, f"{family}:{sev}")
    if family:
        return None
    if kind != "variant" and (item.get("variant") or "0x") != "0x":
        return None  # propagated copies are scored in their variant group only
    if kind == "all":
        return "all"
    if kind == "variant":
        return item.get("variant") or "0x"
    if item["label"] == "real":
        return REAL_GROUP
    return item.get(kind) or "unknown"


class EvalScores(Stage[EvaluationConfig]):
    name = "eval_scores"
    # 4: long-format rows with n, bootstrap intervals and caveats; 5: a caveat on an EntityScore /
    # EvidenceScore that is 0 by construction (structural_zero)
    version = "5"
    inputs = ("detections", "explanations", "eval_sets")
    input_columns = {
        "detections": (
            "detection_id", "detector", "track", "eval_item_id", "eval_set", "sample_id",
            "variant", "label", "answer", "explanation",
        ),
        "explanations": ("sample_id", "kind", "text"),
        GOLD_TABLE: ("sample_id", "annotator", "text", "kind", "label"),  # references: gold
        "eval_sets": (
            "eval_item_id", "generator", "generator_family", "perturbation_family", "severity",
        ),
    }  # fmt: skip
    output_schema = SCHEMA
    key = "score_id"
    partition_by = ("eval_set",)
    config_key = "evaluation"  # the section is owned by eval_sets (EvaluationConfig)
    gather = True

    def stage_config(self) -> Any:
        return {
            "scorers": fingerprint_view(self.cfg.scorers),
            "intervals": fingerprint_view(self.cfg.intervals),
        }

    # -- planning --------------------------------------------------------------------
    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        if not self.cfg.enabled or not any(u.stage == "detections" for u in upstream):
            return []
        specs = []
        for s in EVAL_SETS:
            # shards partitioned by another eval set cannot hold this set's rows
            mine = [u for u in upstream if u.partition.get("eval_set", s) == s]
            if self.cfg.scorers.references == "gold":
                mine += self.ctx.store.manifest(GOLD_TABLE)
            if any(u.stage == "detections" for u in mine):
                specs.append(self.spec(s, {"eval_set": s}, mine, {"eval_set": s}))
        return specs

    # -- reading: one flat table of scored items ---------------------------------------
    def _read(self, shard: ShardSpec, stage: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cols = list(dict.fromkeys([*self.columns_of(stage), "status"]))
        for info in shard.inputs:
            if info.stage == stage:
                # a gold shard imported before the table had ``kind`` lacks it: read it whole
                t = self.ctx.store.read_shard(info, columns=None if stage == GOLD_TABLE else cols)
                out.extend(t.filter(pc.equal(t["status"], "ok")).to_pylist())
        return out

    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        """The ok detections of this eval set joined with their item's generator (eval_sets)
        and reference explanation (explanations): see :func:`join_items`."""
        gold = self.cfg.scorers.references == "gold"
        if gold:
            explanations = gold_as_references(self._read(shard, GOLD_TABLE))
        else:
            explanations = self._read(shard, "explanations")
        return join_items(
            self._read(shard, "detections"),
            explanations,
            self._read(shard, "eval_sets"),
            eval_set=shard.params["eval_set"],
            by_track=gold,
        )

    # -- scoring ------------------------------------------------------------------------
    def _entity_evidence(self, items: list[dict[str, Any]]) -> list[tuple[Score, Score]]:
        from forenset.benchmarks.common.scorers.entity_evidence import (
            ExplanationPair,
            ModelEntityEvidenceEvaluator,
            OfflineEntityEvidenceEvaluator,
        )

        settings = self.cfg.scorers.evaluator
        if settings is None:
            evaluator: Any = OfflineEntityEvidenceEvaluator()
        else:
            from forenset.backends.llm import ResponseCache

            evaluator = ModelEntityEvidenceEvaluator(
                settings,
                build_seed=self.ctx.seed,
                stage=self.name,
                cache=ResponseCache(self.ctx.store.fs, self.ctx.store.root),
            )
        pairs = [
            ExplanationPair(i["detection_id"], i["explanation"] or "", i["reference"])
            for i in items
        ]
        return [(r.entity, r.evidence) for r in evaluator.evaluate(pairs)] if pairs else []

    def _bertscore(self, items: list[dict[str, Any]]) -> tuple[list[Score], Score | None]:
        """Item scores, or the null score of every group when no model is configured."""
        from forenset.benchmarks.common.scorers.bertscore import (
            BACKEND,
            METRIC,
            NO_MODEL,
            BertScorer,
        )

        path = self.cfg.scorers.bertscore_model
        if path is None:
            return [], null_score(METRIC, NO_MODEL, backend=BACKEND)
        scorer = BertScorer(path)
        preds = [i["explanation"] or "" for i in items]
        return scorer.score(preds, [i["reference"] for i in items]), None

    def _sle(self, items: list[dict[str, Any]]) -> tuple[list[Score], Score | None]:
        """Item scores (an empty explanation: 0), or the null score when no model is set."""
        from forenset.benchmarks.common.scorers.sle import BACKEND, METRIC, NO_MODEL, SleScorer

        path = self.cfg.scorers.sle_model
        if path is None:
            return [], null_score(METRIC, NO_MODEL, backend=BACKEND)
        scorer = SleScorer(path)
        texts = [i["explanation"] or "" for i in items]
        scored = iter(scorer.score([t for t in texts if t.strip()]))
        return [
            next(scored)
            if t.strip()
            else Score(METRIC, 0.0, scorer.model_label, BACKEND, details={"empty": True})
            for t in texts
        ], None

    def item_scores(
        self, items: list[dict[str, Any]]
    ) -> tuple[dict[str, dict[str, Score]], dict[str, Score]]:
        """Per item (by detection_id) its scores of its track's metrics, for the items that have
        a reference; and, per metric, its null score everywhere (no model configured)."""
        scored = [i for i in items if i["reference"] is not None]
        complex_ = [i for i in scored if i["track"] == "complex"]
        simple = [i for i in scored if i["track"] == "simple"]
        out: dict[str, dict[str, Score]] = defaultdict(dict)
        for i, (ent, ev) in zip(complex_, self._entity_evidence(complex_), strict=True):
            out[i["detection_id"]].update(entity_score=ent, evidence_score=ev)
        unset: dict[str, Score] = {}
        bert, none = self._bertscore(scored)
        if none is not None:
            unset["bertscore_f1"] = none
        for i, s in zip(scored, bert, strict=False):
            out[i["detection_id"]]["bertscore_f1"] = s
        sle, none = self._sle(simple)
        if none is not None:
            unset["sle"] = none
        for i, s in zip(simple, sle, strict=False):
            out[i["detection_id"]]["sle"] = s
        return out, unset

    def with_item_scores(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``items`` with their model-based item scores under ``scores`` (metric -> Score);
        a metric with no model configured is its null score on every item of its tracks."""
        per_item, unset = self.item_scores(items)
        tracks = {s.name: s.scope.get("track", ()) for s in scorers(FAMILY)}
        out = []
        for i in items:
            got = dict(per_item.get(i["detection_id"], {}))
            got.update({m: s for m, s in unset.items() if i["track"] in tracks.get(m, ())})
            out.append({**i, "scores": got})
        return out

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        t0 = time.perf_counter()
        items = self.with_item_scores(batch.to_pylist())
        groups: dict[tuple[str, str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for i in items:
            for kind in GROUP_KINDS:
                group = group_of(i, kind)
                if group is not None:
                    groups[(i["detector"], i["track"], i["eval_set"], kind, group)].append(i)
        metrics = scorers(FAMILY)
        rows = []
        for key, members in sorted(groups.items()):
            detector, track, eval_set, kind, group = key
            made = score_rows(
                dict(zip(GROUP_FIELDS, key, strict=True)),
                f"{detector}/{track}/{eval_set}/{kind}={group}",
                members,
                metrics,
                self.cfg.intervals,
                self.ctx.seed,
            )
            for r in made:
                why = structural_zero(r["metric"], members)
                if why and r["value"] == 0:
                    r["caveat"] = "; ".join(c for c in (r["caveat"], why) if c)
            rows += made
        ms = (time.perf_counter() - t0) * 1000 / max(1, len(rows))
        for r in rows:
            r.update(status="ok", stage_version=self.version, elapsed_ms=ms)
        return self.to_table(rows)


ENTITY_METRICS = {"entity_score": "entity", "evidence_score": "evidence claim"}


def structural_zero(metric: str, members: list[dict[str, Any]]) -> str | None:
    """The caveat of an EntityScore / EvidenceScore that is 0 on every item because one side
    never names what the other does: recall 0 on every item (no reference entity, or claim, is
    found in the responder's explanation) or precision 0 on every item; the score is their
    harmonic mean, so it is 0 whatever else the texts say. The offline forensic detector names
    image positions and forensic measures, never the scene entities the references name: its 0
    says that, not that its explanations are wrong, and a user must be told so."""
    what = ENTITY_METRICS.get(metric)
    if what is None:
        return None
    got = [(m.get("scores") or {}).get(metric) for m in members]
    scored = [s for s in got if s is not None and s.value is not None]
    if not scored or any(s.value for s in scored):
        return None
    n = len(scored)
    if all(not s.details.get("recall") for s in scored):
        why = f"no {what} of the {n} reference texts is named in this responder's explanation"
        side = "recall"
    elif all(not s.details.get("precision") for s in scored):
        why = f"no {what} of this responder's {n} explanations is found in its reference"
        side = "precision"
    else:
        return None
    return (
        f"0 by construction: {why} ({side} 0 on every item; the score is the harmonic mean of "
        "precision and recall): the two name different things, e.g. image positions and "
        "forensic measures against scene entities"
    )


def gold_as_references(gold: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gold rows as ``explanations`` rows whose kind is the track they are the reference of
    and with the truth they were written for (Label Studio gold names neither: ``complex`` of a
    fake): one per sample and track, the text of the first annotator by name (module doc)."""
    first: dict[tuple[str, str], dict[str, Any]] = {}
    for g in sorted(gold, key=lambda g: (g["sample_id"] or "", g["annotator"] or "")):
        if g["sample_id"] and g.get("text"):
            first.setdefault((g["sample_id"], g.get("kind") or "complex"), g)
    return [
        {"sample_id": s, "kind": k, "text": g["text"], "label": g.get("label") or "fake"}
        for (s, k), g in first.items()
    ]


ITEM_SCHEMA = pa.schema(
    [
        (n, pa.string())
        for n in (
            "detection_id", "detector", "track", "eval_set", "eval_item_id", "sample_id",
            "variant", "label", "answer", "explanation", "generator", "generator_family",
            "perturbation_family", "reference",
        )
    ]
    + [("severity", pa.float64())]
)  # fmt: skip


def _reference(
    refs: dict[tuple[str, str], dict[str, Any]], d: dict[str, Any], by_track: bool
) -> str | None:
    if not by_track:
        got = refs.get((d["sample_id"], reference_kind(d["track"], d["label"])))
        return got["text"] if got else None
    got = refs.get((d["sample_id"], d["track"]))
    return got["text"] if got and got.get("label") == d["label"] else None


def join_items(
    detections: list[dict[str, Any]],
    explanations: list[dict[str, Any]],
    eval_sets: list[dict[str, Any]],
    *,
    eval_set: str,
    by_track: bool = False,
) -> pa.Table:
    """One row per detection of ``eval_set``: its answer and explanation, its item's generator
    and family, and the reference text (:func:`reference_kind`; ``by_track``: the reference of
    the item's track, as gold is kept, when written for the item's truth), null when the sample
    has none."""
    refs = {(e["sample_id"], e["kind"]): e for e in explanations if e.get("text")}
    gens = {e["eval_item_id"]: e for e in eval_sets}
    rows = []
    for d in detections:
        if d["eval_set"] != eval_set:
            continue
        g = gens.get(d["eval_item_id"], {})
        rows.append(
            {
                **{k: d[k] for k in ITEM_SCHEMA.names if k in d},
                "generator": g.get("generator"),
                "generator_family": g.get("generator_family"),
                "perturbation_family": g.get("perturbation_family"),
                "severity": g.get("severity"),
                "reference": _reference(refs, d, by_track),
            }
        )
    return pa.Table.from_pylist(
        [{n: r.get(n) for n in ITEM_SCHEMA.names} for r in rows], schema=ITEM_SCHEMA
    )
