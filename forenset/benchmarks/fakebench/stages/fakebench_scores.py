"""fakebench_scores: FakeBench's measures per evaluated model and task (§4.1, Tables 4–7).

A gathering stage, one shard per evaluated model (partition ``answerer``). Long format: each
output row is one ``metric`` of one (model, task, group), scored by the registry's
``fakebench`` scorers (:mod:`forenset.benchmarks.fakebench.scorers`) with
:func:`~forenset.benchmarks.common.scoring.score_rows`: its ``value``, ``n`` (the units behind
it: items with a value; FakeQA ``all``: images, as its mean is per image), a seeded bootstrap
interval over those units (``ci_low`` / ``ci_high``, or ``ci_reason``), the ``model`` behind it,
``reason`` when null and ``caveat`` when not meaningful (one class in a set that needs both, or
fewer than ``fakebench.intervals.min_n`` units). ``details`` holds ``n_items`` (answers scored;
FakeQA: questions), ``n_images`` and, for the averages, ``of`` (the measures covered). The groups
and metrics:

* **FakeClass** (``task = fakeclass``): accuracy, the share of questions whose reply passes the
  exact-match rule of §3.2 (:func:`forenset.benchmarks.fakebench.text.exact_match`: the reply's authenticity
  keyword must be the answer and the only one, so "fake" to "Is this a fake image?" is wrong).
  Groups: ``all``, ``label`` (real / fake, Table 4's subsets) and ``form`` (yes_no / what: the
  robustness to question formation).
* **FakeClue** (``fakeclue``): the inference-mode reasoning against the golden clue C: BLEU-1,
  BLEU-2, ROUGE-L (:mod:`forenset.benchmarks.common.scorers.text_overlap`), sentence similarity
  (:mod:`~forenset.benchmarks.common.scorers.similarity`, a local encoder: ``fakebench.similarity_model``)
  and judged Completeness / Preciseness / Relevance in {0, 1, 2}, each the mean of
  ``judge_rounds`` rounds (five in the paper; :mod:`~forenset.benchmarks.fakebench.judged`,
  ``fakebench.judge``). ``accuracy`` here is the verdict given after the reasoning (Table 8).
  Groups: ``mode`` = ``inference`` (reasoning) and ``fault_finding`` (interpretation, when
  ``clue_modes`` asks for it), scored apart, never pooled; ``verdict`` = ``inference``: items of
  FakeBench's official release whose golden clue is withheld, scored for the verdict only.
* **FakeQA** (``fakeqa``): the same measures per question; as §3.5 says, the questions of one
  image are averaged first, then the images. Groups: ``all`` and ``dimension`` (the questions
  of one dimension, averaged directly).

``average`` is the overall measure of §4.1 as Tables 5-7 compute it: the mean of two averages,
``auto_average`` (BLEU-1, BLEU-2, ROUGE-L, similarity: the "Automatic Metrics Aver." column) and
``judged_average`` (Completeness, Preciseness, Relevance on their 0-2 scale: the "GPT-assisted
Aver." column) divided by 2 to [0, 1]; e.g. GPT-4V in Table 5: (0.282 + 1.729 / 2) / 2 = 0.573.
When one side is missing (no judge, no encoder), each side averages what it has and the overall
is the side present; ``details.of`` names the measures, so such an average is never mistaken for
the full one. The averages' intervals resample the items once and recompute every measure and
then the averages on that resample.
An answer that is an error row (a failed call) is not scored; an item that has no answer at all
counts as wrong for FakeClass and as an empty text (scored 0) elsewhere: a model cannot gain by
failing. Without a judge or an encoder the columns are null with the reason. Judge rounds that
fail with a transient error are left out of the means and reported in one retryable error row
(``<model>/judge-rounds-failed``), so the next build asks them again (answered rounds come from
the response cache).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from statistics import fmean
from typing import Any

import pyarrow as pa

from forenset.benchmarks.common.scorers.types import Score, null_score
from forenset.benchmarks.common.scoring.intervals import degenerate
from forenset.benchmarks.fakebench.config import FakeBenchConfig
from forenset.benchmarks.fakebench.schemas.fakebench_scores import SCHEMA
from forenset.benchmarks.fakebench.scorers import (
    JUDGED,
    MEASURES,
    MODEL_METRICS,
    overall_average,  # noqa: F401 - imported from here by callers (tests, docs)
)
from forenset.benchmarks.fakebench.text import exact_match
from forenset.confbase import fingerprint_view
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage

WITHHELD = "the golden clues are withheld (FakeBench's public release): the verdict only"


def withheld(item: dict[str, Any]) -> bool:
    """A FakeClue inference item of the official release without its golden clue."""
    return item["task"] == "fakeclue" and item.get("golden_source") == "withheld"


class FakeBenchScores(Stage[FakeBenchConfig]):
    name = "fakebench_scores"
    # 2: overall = mean of the automatic and the judged average (Tables 5-7)
    # 3: long format (one row per metric) with n, bootstrap intervals and caveats
    version = "3"
    inputs = ("fakebench_items", "fakebench_answers")
    input_columns = {
        "fakebench_items": ("item_id", "task", "sample_id", "label", "form", "question",
                            "answer", "dimension", "generator", "golden_source"),
        "fakebench_answers": ("answer_id", "answerer", "item_id", "response", "verdict"),
    }  # fmt: skip
    output_schema = SCHEMA
    key = "score_id"
    partition_by = ("answerer",)
    config_key = "fakebench"
    gather = True

    @property
    def fcfg(self) -> FakeBenchConfig:
        return self.cfg

    def stage_config(self) -> Any:
        v = fingerprint_view(self.fcfg)
        return {k: v[k] for k in ("judge", "judge_rounds", "similarity_model", "intervals")}

    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        if not self.fcfg.enabled:
            return []
        items = [u for u in upstream if u.stage == "fakebench_items"]
        specs = []
        for u in upstream:
            if u.stage == "fakebench_answers":
                name = u.partition.get("answerer", u.shard_id)
                specs.append(self.spec(name, {"answerer": name}, [*items, u], {"answerer": name}))
        return specs

    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        """The items joined with this model's ok answers (no answer: response null)."""
        items: list[dict[str, Any]] = []
        answers: dict[str, dict[str, Any]] = {}
        for info in shard.inputs:
            one = ShardSpec(shard.stage, shard.shard_id, shard.partition, [info], shard.params)
            got = super().read_inputs(one).to_pylist()
            if info.stage == "fakebench_items":
                items.extend(got)
            else:
                answers.update({a["item_id"]: a for a in got})
        name = shard.params["answerer"]
        rows = [
            {**i, "answerer": name, "response": answers.get(i["item_id"], {}).get("response"),
             "verdict": answers.get(i["item_id"], {}).get("verdict"),
             "answered": i["item_id"] in answers}
            for i in items
        ]  # fmt: skip
        return (
            pa.Table.from_pylist(rows) if rows else pa.table({"item_id": pa.array([], pa.string())})
        )

    # -- per-item model scores ----------------------------------------------------------------
    def similarity(self, items: list[dict[str, Any]]) -> list[Score]:
        from forenset.benchmarks.common.scorers.similarity import NO_MODEL, SentenceSimilarityScorer

        scorer = SentenceSimilarityScorer(self.fcfg.similarity_model)
        scorer.no_model = f"{NO_MODEL} (fakebench.similarity_model)"
        return scorer.score([i["response"] or "" for i in items], [i["answer"] for i in items])

    def judged(self, items: list[dict[str, Any]]) -> list[dict[str, Score]]:
        from forenset.benchmarks.fakebench.judged import NO_JUDGE, JudgedPair, ModelCPRJudge

        if self.fcfg.judge is None:
            return [{m: null_score(m, NO_JUDGE) for m in JUDGED} for _ in items]
        from forenset.backends.llm import ResponseCache

        judge = ModelCPRJudge(
            self.fcfg.judge,
            rounds=self.fcfg.judge_rounds,
            build_seed=self.ctx.seed,
            stage=self.name,
            cache=ResponseCache(self.ctx.store.fs, self.ctx.store.root),
            prompts_root=self.fcfg.prompts_dir,
        )
        pairs = [
            JudgedPair(i["item_id"], i["question"], i["response"] or "", i["answer"]) for i in items
        ]
        got = judge.evaluate(pairs)
        self.transient_failures = judge.transient_failures
        return got

    def item_scores(self, items: list[dict[str, Any]]) -> dict[str, dict[str, Score]]:
        from forenset.benchmarks.common.scorers.text_overlap import overlap_scores

        out: dict[str, dict[str, Score]] = {}
        for i in items:
            out[i["item_id"]] = overlap_scores(i["response"] or "", i["answer"])
        for i, s in zip(items, self.similarity(items), strict=True):
            out[i["item_id"]]["similarity"] = s
        for i, js in zip(items, self.judged(items), strict=True):
            out[i["item_id"]].update(js)
        return out

    # -- groups -------------------------------------------------------------------------------
    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        assert shard is not None
        t0 = time.perf_counter()
        name = shard.params["answerer"]
        items = [i for i in batch.to_pylist() if i.get("answer") is not None or withheld(i)]
        text_items = [
            i for i in items if i["task"] in ("fakeclue", "fakeqa") and i["answer"] is not None
        ]
        scores = self.item_scores(text_items) if text_items else {}
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for i in items:
            if withheld(i):  # no golden clue to compare with: the verdict alone (Table 8)
                groups[(i["task"], "verdict", i["form"])].append(i)
                continue
            if i["task"] == "fakeclue":  # the two modes are two evaluations, never pooled
                groups[(i["task"], "mode", i["form"])].append(i)
                continue
            groups[(i["task"], "all", "all")].append(i)
            if i["task"] == "fakeclass":
                groups[(i["task"], "label", i["label"])].append(i)
                groups[(i["task"], "form", i["form"])].append(i)
                gen = "real" if i["label"] == "real" else (i.get("generator") or "unknown")
                groups[(i["task"], "generator", gen)].append(i)
            if i["task"] == "fakeqa":
                groups[(i["task"], "dimension", i["dimension"])].append(i)
        rows = [
            r
            for key, members in sorted(groups.items())
            for r in self.group_rows(name, key, members, scores)
        ]
        failures = getattr(self, "transient_failures", 0)
        if failures:  # the means above leave those rounds out; a rebuild asks them again
            were, them = ("were", "them") if failures > 1 else ("was", "it")
            rows.append(
                {
                    "score_id": f"{name}/judge-rounds-failed",
                    "answerer": name,
                    "status": "error",
                    "error": f"{failures} judge round{'s' if failures > 1 else ''} failed with a "
                    f"transient error and {were} left out of the means; a rebuild asks {them} "
                    "again",
                    "retryable": True,
                }
            )
        ms = (time.perf_counter() - t0) * 1000 / max(1, len(rows))
        for r in rows:
            r.setdefault("status", "ok")
            r.update(backend="scorers", stage_version=self.version, elapsed_ms=ms)
            r.setdefault("metric", None)
        return self.to_table(rows)

    def group_rows(
        self,
        name: str,
        key: tuple[str, str, str],
        members: list[dict[str, Any]],
        scores: dict[str, dict[str, Score]],
    ) -> list[dict[str, Any]]:
        """The group's metrics as long rows, scored by the registry's ``fakebench`` scorers
        over the group's units (items; FakeQA ``all``: images)."""
        from forenset.benchmarks.common.scoring import metric_names, score_rows, scorer

        task, kind, group = key
        fields = {"answerer": name, "task": task, "group_kind": kind, "group": group}
        prefix = f"{name}/{task}/{kind}={group}"
        if task == "fakeclass":
            units = [
                {"label": m["label"], "hit": float(exact_match(m["form"], m["answer"],
                                                               m["response"]))}
                for m in members
            ]  # fmt: skip
            chosen = {"accuracy"}
        elif kind == "verdict":  # golden clues withheld (official release): the verdict only
            units = [
                {"label": m["label"], "hit": float(m["verdict"] == m["label"])} for m in members
            ]
            chosen = {"accuracy"}
        else:
            units = self.units(members, scores, task == "fakeqa" and kind == "all")
            chosen = set(metric_names("fakebench")) - {"accuracy"}
            if task == "fakeclue" and group == "inference":  # the verdict after the reasoning
                chosen.add("accuracy")
                for u, m in zip(units, members, strict=True):
                    u["hit"] = float(m["verdict"] == m["label"])
        scorers = [scorer("fakebench", n) for n in metric_names("fakebench") if n in chosen]
        rows = score_rows(fields, prefix, units, scorers, self.fcfg.intervals, self.ctx.seed)
        extra = {"n_items": len(members), "n_images": len({m["sample_id"] for m in members})}
        # Table 4's real / fake and per-generator columns are one class by design; every other
        # accuracy needs both classes to be a detection score
        one_class = (
            None
            if kind in ("label", "generator")
            else degenerate(len(units), 1, [u["label"] for u in units], ("real", "fake"))
        )
        for r in rows:
            r["details"] = json.dumps({**json.loads(r["details"] or "{}"), **extra}, sort_keys=True)
            if r["metric"] == "accuracy" and one_class and r["value"] is not None:
                r["caveat"] = one_class
            if r["value"] is None:
                r["caveat"] = None  # a null value is a dash with its reason, not a caveat
        if kind == "verdict":
            rows += [
                {**fields, "score_id": f"{prefix}/{m}", "metric": m, "value": None, "n": 0,
                 "ci_low": None, "ci_high": None, "ci_reason": "no value", "model": None,
                 "reason": WITHHELD, "caveat": None, "details": json.dumps(extra, sort_keys=True),
                 "seed": rows[0]["seed"] if rows else None}
                for m in MODEL_METRICS
            ]  # fmt: skip
        return rows

    @staticmethod
    def units(
        members: list[dict[str, Any]], scores: dict[str, dict[str, Score]], per_image: bool
    ) -> list[dict[str, Any]]:
        """The scorers' units: each item with its scores, or (``per_image``) each image with the
        mean of its questions' values per measure (§3.5), null with the reason when none has one."""
        if not per_image:
            return [{"label": m["label"], "scores": scores[m["item_id"]]} for m in members]
        images: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for m in members:
            images[m["sample_id"]].append(m)
        out = []
        for ms in images.values():
            unit: dict[str, Score] = {}
            for metric in MEASURES:
                got = [scores[m["item_id"]][metric] for m in ms]
                ok = [x.value for x in got if x.value is not None]
                model = next((x.model for x in got if x.model), "")
                backend = next((x.backend for x in got if x.backend), "")
                unit[metric] = (
                    Score(metric, fmean(ok), model, backend)
                    if ok
                    else null_score(metric, next(x.reason for x in got) or "no value",
                                    model=model, backend=backend)
                )  # fmt: skip
            out.append({"label": ms[0]["label"], "scores": unit})
        return out
