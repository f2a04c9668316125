"""fakebench_scores: FakeBench's measures per evaluated model and task (§4.1, Tables 4–7).

A gathering stage, one shard per evaluated model (partition ``answerer``). Long format: each
output row is one ``metric`` of one (model, task, group) with its ``value``, ``n`` (answers
scored; FakeQA: questions), a seeded bootstrap interval (``ci_low`` / ``ci_high``, or
``ci_reason``) over the group's items (FakeQA ``all``: over images, as its mean is per image),
the ``model`` behind it, ``reason`` when null and ``caveat`` when not meaningful (one class in a
set that needs both, or fewer than ``fakebench.intervals.min_n`` units). ``details`` holds
``n_images`` (and ``of``: the measures an average covers). The groups and metrics:

* **FakeClass** (``task = fakeclass``): accuracy, the share of questions whose reply passes the
  exact-match rule of §3.2 (:func:`forenset.benchmarks.fakebench.text.exact_match`: the reply's authenticity
  keyword must be the answer and the only one, so "fake" to "Is this a fake image?" is wrong).
  Groups: ``all``, ``label`` (real / fake, Table 4's subsets) and ``form`` (yes_no / what: the
  robustness to question formation).
* **FakeClue** (``fakeclue``): the inference-mode reasoning against the golden clue C: BLEU-1,
  BLEU-2, ROUGE-L (:mod:`forenset.benchmarks.common.scorers.text_overlap`), sentence similarity
  (:mod:`~forenset.benchmarks.common.scorers.similarity`, a local encoder: ``fakebench.similarity_model``)
  and judged Completeness / Preciseness / Relevance in {0, 1, 2}, each the mean of
  ``judge_rounds`` rounds (five in the paper; :mod:`~forenset.benchmarks.common.scorers.judged`,
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
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from statistics import fmean
from typing import Any

import numpy as np
import pyarrow as pa

from forenset.benchmarks.common.scorers.types import Score, null_score
from forenset.benchmarks.common.scoring.intervals import bootstrap, degenerate, row_seed
from forenset.benchmarks.fakebench.config import FakeBenchConfig
from forenset.benchmarks.fakebench.schemas.fakebench_scores import SCHEMA
from forenset.benchmarks.fakebench.text import exact_match
from forenset.confbase import fingerprint_view
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage

OVERLAP = ("bleu1", "bleu2", "rouge_l")
JUDGED = ("completeness", "preciseness", "relevance")
MODEL_METRICS = ("similarity", *JUDGED)
NOT_FAKECLASS = "FakeClass is scored by accuracy only"
AVERAGES = ("auto_average", "judged_average", "average")
NO_RESAMPLES = "no interval: fakebench.intervals.resamples is 0"
NO_CI_ITEMS = "no interval: fewer than two items or no defined resample"
WITHHELD = "the golden clues are withheld (FakeBench's public release): the verdict only"


def withheld(item: dict[str, Any]) -> bool:
    """A FakeClue inference item of the official release without its golden clue."""
    return item["task"] == "fakeclue" and item.get("golden_source") == "withheld"


def image_mean(values: Sequence[tuple[str, float]]) -> float:
    """Mean over images of the mean over each image's values (FakeQA, §3.5)."""
    per: dict[str, list[float]] = defaultdict(list)
    for image, v in values:
        per[image].append(v)
    return fmean(fmean(vs) for vs in per.values())


AUTOMATIC = (*OVERLAP, "similarity")


def overall_average(
    row: dict[str, Any],
) -> tuple[float | None, float | None, float | None, str | None]:
    """(automatic Aver., judged Aver. on 0-2, overall on 0-1, the measures used), as FakeBench's
    Tables 5-7: overall = (automatic Aver. + judged Aver. / 2) / 2 (§4.1: "the average of
    automatic and GPT-assisted measures scaled to the range of [0,1]"). A side with no measure
    is None and the overall is the other side alone."""
    auto = [row[m] for m in AUTOMATIC if row.get(m) is not None]
    judged = [row[m] for m in JUDGED if row.get(m) is not None]
    a = fmean(auto) if auto else None
    j = fmean(judged) if judged else None
    sides = [v for v in (a, None if j is None else j / 2) if v is not None]
    if not sides:
        return None, None, None, None
    used = [m for m in (*AUTOMATIC, *JUDGED) if row.get(m) is not None]
    return a, j, fmean(sides), ",".join(used)


class FakeBenchScores(Stage):
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
        from forenset.benchmarks.common.scorers.similarity import SentenceSimilarityScorer

        scorer = SentenceSimilarityScorer(self.fcfg.similarity_model)
        return scorer.score([i["response"] or "" for i in items], [i["answer"] for i in items])

    def judged(self, items: list[dict[str, Any]]) -> list[dict[str, Score]]:
        from forenset.benchmarks.common.scorers.judged import NO_JUDGE, JudgedPair, ModelCPRJudge

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
        """The group's metrics as long rows (values computed as the wide table did)."""
        task, kind, group = key
        n, n_images = len(members), len({m["sample_id"] for m in members})
        base = {
            "answerer": name,
            "task": task,
            "group_kind": kind,
            "group": group,
            "n": n,
        }
        iv = self.fcfg.intervals
        # a subset by label or generator is one class by design (Table 4's real / fake columns)
        classes = None if kind in ("label", "generator") else [m["label"] for m in members]
        one_class = degenerate(n, 1, classes, ("real", "fake")) if classes else None
        per_image = task == "fakeqa" and kind == "all"
        units = n_images if per_image else n
        few = degenerate(units, iv.min_n)
        if few and per_image:
            few = f"{units} images (FakeQA averages per image) is below the minimum of {iv.min_n}"
        details = {"n_images": n_images}
        prefix = f"{name}/{task}/{kind}={group}"

        def row(metric: str, value: float | None, **kw: Any) -> dict[str, Any]:
            out = {
                **base,
                "score_id": f"{prefix}/{metric}",
                "metric": metric,
                "value": value,
                "ci_low": None,
                "ci_high": None,
                "ci_reason": None,
                "model": None,
                "reason": None,
                "caveat": None,
                "details": json.dumps(details, sort_keys=True),
            }
            out.update(kw)
            ci = out.pop("ci", None)
            if ci is not None:
                out["ci_low"], out["ci_high"] = ci
            elif value is None:
                out["ci_reason"] = f"no interval: {out['reason']}"
            else:
                out["ci_reason"] = NO_RESAMPLES if iv.resamples < 1 else NO_CI_ITEMS
            return out

        def ci(x: np.ndarray, stat: Callable[[np.ndarray], np.ndarray], metric: str) -> Any:
            seed = row_seed(self.ctx.seed if iv.seed is None else iv.seed, f"{prefix}/{metric}")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN resample columns
                return bootstrap(x, stat, resamples=iv.resamples, level=iv.level, seed=seed)

        def acc_row(hits: list[bool]) -> dict[str, Any]:
            x = np.asarray(hits, dtype=float)
            return row(
                "accuracy", fmean(hits), ci=ci(x, lambda a: a[..., 0].mean(axis=1), "accuracy"),
                caveat=one_class or few,
            )  # fmt: skip

        if task == "fakeclass":
            return [acc_row([exact_match(m["form"], m["answer"], m["response"]) for m in members])]
        if kind == "verdict":  # golden clues withheld (official release): the verdict only
            out = [acc_row([m["verdict"] == m["label"] for m in members])]
            return out + [row(m, None, reason=WITHHELD) for m in MODEL_METRICS]
        out = []
        # FakeClue: the verdict after the reasoning; FakeQA has no verdict
        if task == "fakeclue" and group == "inference":
            out.append(acc_row([m["verdict"] == m["label"] for m in members]))
        wide: dict[str, Any] = {}
        models: dict[str, str | None] = {}
        reasons: dict[str, str | None] = {}

        def mean(ms: list[dict[str, Any]], metric: str) -> float | None:
            return self._mean(ms, metric, scores, per_image)

        for metric in OVERLAP:
            wide[metric] = mean(members, metric)
            models[metric] = scores[members[0]["item_id"]]["bleu1"].model
        for metric in MODEL_METRICS:
            got = [scores[m["item_id"]][metric] for m in members]
            ok = [s for s in got if s.ok]
            models[metric] = ",".join(sorted({s.model for s in got if s.model})) or None
            if ok:
                wide[metric] = mean([m for m, s in zip(members, got, strict=True) if s.ok], metric)
            else:
                wide[metric] = None
                reasons[metric] = next(s.reason for s in got)
        auto, judged, overall, of = overall_average(wide)
        # per unit (item; FakeQA all: image) x metric, NaN where the item has no score
        metrics = (*AUTOMATIC, *JUDGED)
        unit_of = [m["sample_id"] if per_image else m["item_id"] for m in members]
        order = list(dict.fromkeys(unit_of))
        cells: dict[str, list[list[float]]] = {u: [[] for _ in metrics] for u in order}
        for m, u in zip(members, unit_of, strict=True):
            for j, metric in enumerate(metrics):
                v = scores[m["item_id"]][metric].value
                if v is not None:
                    cells[u][j].append(v)
        x = np.asarray(
            [[fmean(vs) if vs else np.nan for vs in cells[u]] for u in order], dtype=float
        ).reshape(-1, len(metrics))
        used = [j for j, metric in enumerate(metrics) if wide.get(metric) is not None]

        def col(j: int) -> Callable[[np.ndarray], np.ndarray]:
            return lambda a: np.nanmean(a[..., j], axis=1)

        def averages(a: np.ndarray) -> np.ndarray:
            means = np.nanmean(a, axis=1)  # (b, metrics)
            auto_j = [j for j in used if metrics[j] in AUTOMATIC]
            judged_j = [j for j in used if metrics[j] in JUDGED]
            sides = []
            if auto_j:
                sides.append(means[:, auto_j].mean(axis=1))
            if judged_j:
                sides.append(means[:, judged_j].mean(axis=1) / 2)
            return np.column_stack(
                [
                    sides[0] if auto_j else np.full(len(a), np.nan),
                    means[:, judged_j].mean(axis=1) if judged_j else np.full(len(a), np.nan),
                    np.mean(sides, axis=0) if sides else np.full(len(a), np.nan),
                ]
            )

        for j, metric in enumerate(metrics):
            v = wide.get(metric)
            out.append(
                row(
                    metric, v, model=models.get(metric),
                    reason=reasons.get(metric) if v is None else None,
                    ci=ci(x, col(j), metric) if v is not None else None,
                    caveat=few if v is not None else None,
                )
            )  # fmt: skip
        for k, (metric, v) in enumerate(zip(AVERAGES, (auto, judged, overall), strict=True)):
            reason = None if v is not None else "none of its measures has a value"
            out.append(
                row(
                    metric, v, reason=reason,
                    ci=ci(x, lambda a, k=k: averages(a)[:, k], metric) if v is not None else None,
                    caveat=few if v is not None else None,
                    details=json.dumps({**details, "of": of}, sort_keys=True),
                )
            )  # fmt: skip
        return out

    @staticmethod
    def _mean(
        members: list[dict[str, Any]], metric: str, scores: dict[str, dict[str, Score]],
        per_image: bool,
    ) -> float | None:  # fmt: skip
        vals = [(m["sample_id"], scores[m["item_id"]][metric].value) for m in members]
        vals = [(k, v) for k, v in vals if v is not None]
        if not vals:
            return None
        return image_mean(vals) if per_image else fmean(v for _, v in vals)
