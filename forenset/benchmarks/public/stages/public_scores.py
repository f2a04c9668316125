"""public_scores: every model's measures per benchmark and task type, long format.

A gathering stage, one shard per model (partition ``answerer``). Each output row is one metric
of one (model, benchmark, task, group), scored by the registry's ``public`` scorers
(``public.scorers``) with ``score_rows``: its value, ``n``, a seeded bootstrap interval
(``public.intervals``), the model behind it, ``reason`` when null and ``caveat`` when not
meaningful (one class only, fewer than ``min_n`` units). Groups:

* ``judgement``: ``all``, ``label`` (real / fake), and where the release has them ``kind``
  (So-Fake: real / full_synthetic / tampered), ``category`` and ``generator``;
* ``multiple_choice``: ``all`` and ``category``;
* ``explanation``: the reply against the reference explanation, for every item that has one
  (LOKI's anomaly task; FakeClue's judgement items, whose reference is the gpt turn; AIGI-Holmes
  with an explanation file): ``all`` and ``category``.

An item without an ok answer counts: a judgement as wrong (verdict None), a multiple choice as
wrong, an explanation as an empty text (0 on every overlap measure): a model cannot gain by
failing.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import Any

import pyarrow as pa

from forenset.benchmarks.common.reads import read_tagged
from forenset.benchmarks.common.scorers.types import Score, null_score
from forenset.benchmarks.common.scoring.intervals import degenerate
from forenset.benchmarks.public.config import PublicConfig
from forenset.benchmarks.public.schemas.public_scores import SCHEMA
from forenset.confbase import fingerprint_view
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage

NO_SIMILARITY = "no sentence-similarity model configured (public.similarity_model)"
NO_BERTSCORE = "no BERTScore model configured (public.bertscore_model)"


class PublicScores(Stage[PublicConfig]):
    name = "public_scores"
    version = "1"
    inputs = ("public_items", "public_answers")
    input_columns = {
        "public_items": ("item_id", "benchmark", "task", "label", "kind", "category",
                         "generator", "answer", "reference"),
        "public_answers": ("answer_id", "answerer", "item_id", "verdict", "choice",
                           "explanation"),
    }  # fmt: skip
    output_schema = SCHEMA
    key = "score_id"
    partition_by = ("answerer",)
    config_key = "public"
    gather = True

    @property
    def pcfg(self) -> PublicConfig:
        return self.cfg

    def stage_config(self) -> Any:
        v = fingerprint_view(self.pcfg)
        return {k: v[k] for k in ("bertscore_model", "similarity_model", "intervals")}

    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        if not self.pcfg.enabled:
            return []
        items = [u for u in upstream if u.stage == "public_items"]
        specs = []
        for u in upstream:
            if u.stage == "public_answers":
                name = u.partition.get("answerer", u.shard_id)
                specs.append(self.spec(name, {"answerer": name}, [*items, u], {"answerer": name}))
        return specs

    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        return read_tagged(self, shard)

    @staticmethod
    def joined(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The items with this model's ok answer (no answer: nulls, scored as wrong / empty)."""
        answers = {r["item_id"]: r for r in rows if r["input"] == "public_answers"}
        return [
            {**i, "verdict": (a := answers.get(i["item_id"], {})).get("verdict"),
             "choice": a.get("choice"), "response": a.get("explanation")}
            for i in rows
            if i["input"] == "public_items"
        ]  # fmt: skip

    def text_scores(self, items: list[dict[str, Any]]) -> dict[str, dict[str, Score]]:
        """Per item with a reference: BLEU-1, ROUGE-L, BERTScore-F1, similarity."""
        from forenset.benchmarks.common.scorers.text_overlap import overlap_scores

        preds = [i["response"] or "" for i in items]
        refs = [i["reference"] for i in items]
        out = {}
        for i, p, r in zip(items, preds, refs, strict=True):
            o = overlap_scores(p, r)
            out[i["item_id"]] = {"bleu1": o["bleu1"], "rouge_l": o["rouge_l"]}
        if self.pcfg.similarity_model:
            from forenset.benchmarks.common.scorers.similarity import SentenceSimilarityScorer

            sims = SentenceSimilarityScorer(self.pcfg.similarity_model).score(preds, refs)
        else:
            sims = [null_score("similarity", NO_SIMILARITY) for _ in items]
        if self.pcfg.bertscore_model:
            from forenset.benchmarks.common.scorers.bertscore import BertScorer

            berts = BertScorer(self.pcfg.bertscore_model).score(preds, refs)
        else:
            berts = [null_score("bertscore_f1", NO_BERTSCORE) for _ in items]
        for i, s, b in zip(items, sims, berts, strict=True):
            out[i["item_id"]].update(similarity=s, bertscore_f1=b)
        return out

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        assert shard is not None
        t0 = time.perf_counter()
        name = shard.params["answerer"]
        items = self.joined(batch.to_pylist())
        texts = [i for i in items if i.get("reference")]
        scores = self.text_scores(texts) if texts else {}
        groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for i in items:
            b, task = i["benchmark"], i["task"]
            if task in ("judgement", "multiple_choice"):
                groups[(b, task, "all", "all")].append(i)
                if i.get("category"):
                    groups[(b, task, "category", i["category"])].append(i)
            if task == "judgement":
                groups[(b, task, "label", i["label"])].append(i)
                for kind in ("kind", "generator"):
                    if i.get(kind) and (kind != "kind" or i[kind] not in ("real", "fake")):
                        groups[(b, task, kind, i[kind])].append(i)
            if i.get("reference"):
                groups[(b, "explanation", "all", "all")].append(i)
                if i.get("category"):
                    groups[(b, "explanation", "category", i["category"])].append(i)
        rows = [
            r
            for key, members in sorted(groups.items())
            for r in self.group_rows(name, key, members, scores)
        ]
        ms = (time.perf_counter() - t0) * 1000 / max(1, len(rows))
        for r in rows:
            r.setdefault("status", "ok")
            r.update(backend="scorers", stage_version=self.version, elapsed_ms=ms)
        return self.to_table(rows)

    def group_rows(
        self,
        name: str,
        key: tuple[str, str, str, str],
        members: list[dict[str, Any]],
        scores: dict[str, dict[str, Score]],
    ) -> list[dict[str, Any]]:
        from forenset.benchmarks.common.scoring import score_rows, scorers

        bench, task, kind, group = key
        fields = {"answerer": name, "benchmark": bench, "task": task, "group_kind": kind,
                  "group": group}  # fmt: skip
        if task == "judgement":
            units = [{"label": m["label"], "verdict": m["verdict"]} for m in members]
        elif task == "multiple_choice":
            units = [{"label": None, "hit": float(m["choice"] == m["answer"])} for m in members]
        else:
            units = [{"label": m.get("label"), "scores": scores[m["item_id"]]} for m in members]
        prefix = f"{name}/{bench}/{task}/{kind}={group}"
        c = self.pcfg.intervals
        rows = score_rows(fields, prefix, units, scorers("public"), c, self.ctx.seed)
        one_class = kind in ("label", "kind")  # one class by design: its accuracy alone
        if one_class:
            rows = [r for r in rows if r["metric"] not in ("f1", "real_accuracy", "fake_accuracy")]
        extra = {"n_items": len(members)}
        for r in rows:
            r["details"] = json.dumps({**json.loads(r["details"] or "{}"), **extra}, sort_keys=True)
            if one_class and r["metric"] == "accuracy":
                r["caveat"] = degenerate(r["n"], c.min_n)
            if r["value"] is None:
                r["caveat"] = None  # a null value is a dash with its reason, not a caveat
        return rows
