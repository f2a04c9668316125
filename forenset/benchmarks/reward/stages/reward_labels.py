"""reward_labels: the ground-truth 4-way label H_t of each triplet (§3.3 "Annotation", "Filtering").

Human labels come from a Label Studio JSON export (``reward.labels.path``) of the triplet tasks
that ``forenset reward RUN_DIR --label-studio OUT`` writes (App. A's rubric as instructions):
each annotation's choice, annotator (``completed_by``) and ``lead_time`` are read; annotations
faster than ``min_lead_time_s`` are dropped (App. B: fifteen seconds); the kept ones are
majority-voted; a tie stays unlabelled (``tied``, ``label`` null), listed by ``forenset reward``
for manual resolution, and ``reward.labels.resolutions: {triplet_id: choice}`` resolves it
(``resolved_by = manual``). Cancelled annotations are ignored. Tasks naming no known triplet, and
annotations without one of the four choices, are one error row per class of problem.

Without ``path``, ``reward.labels.simulate`` annotators label every triplet by the documented
noisy rule (``benchmarks/reward/scorers/rubric.py``); every such row has ``source = simulated`` and the
annotators are ``sim-1`` … ``sim-N``. The two sources are never mixed in one build.

With ``reward.release`` the labels are the release's annotation records: every annotation kept
(the release records no lead time), majority-voted the same way, ties listed and resolved by
``reward.labels.resolutions``; ``source`` human (or what the record's ``source`` says: forenset's
export marks simulated labels); annotations with none of the four choices are error rows.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from forenset.benchmarks.common.predictions import file_digest
from forenset.benchmarks.reward.config import LabelsConfig, RewardConfig
from forenset.benchmarks.reward.schemas.reward_labels import SCHEMA
from forenset.benchmarks.reward.scorers.metrics import CHOICES, majority
from forenset.benchmarks.reward.scorers.rubric import SIM_MODEL, simulate_annotator
from forenset.benchmarks.reward.stages.release_input import release_config, release_rows
from forenset.confbase import fingerprint_view
from forenset.errors import ConfigurationError, clip
from forenset.seeds import rng_for
from forenset.store.run_store import ShardInfo
from forenset.strict import finite, strict_bool
from forenset.tasks.base import ShardSpec, Stage, dumps

SHARD = "labels"
ALIASES = {"both bad": "BothBad", "bothbad": "BothBad", "both_bad": "BothBad"}


def canonical(choice: Any) -> str | None:
    """A Label Studio choice value as one of the four (``Both Bad`` -> ``BothBad``)."""
    if not isinstance(choice, str):
        return None
    c = choice.strip()
    if c in CHOICES:
        return c
    return ALIASES.get(c.lower()) or next((x for x in CHOICES if x.lower() == c.lower()), None)


def annotator_id(completed_by: Any) -> str:
    """Label Studio writes ``completed_by`` as a user id, or an object with id / email."""
    if isinstance(completed_by, dict):
        return str(completed_by.get("email") or completed_by.get("id"))
    return str(completed_by)


def read_export(path: str) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[str]]]:
    """Annotations by triplet id ({annotator, choice, lead_time}) and problems by class."""
    from forenset.paths import read_text_file

    try:
        tasks = json.loads(read_text_file(path))
    except (OSError, ValueError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else e
        raise ConfigurationError(f"cannot read the Label Studio export {clip(path)}: {why}") from e
    if not isinstance(tasks, list):
        raise ConfigurationError(f"{path} is not a Label Studio JSON export (a list of tasks)")
    found: dict[str, list[dict[str, Any]]] = {}
    problems: dict[str, list[str]] = {}
    for n, task in enumerate(tasks):
        # every field is type-checked: a wrong-typed task or annotation is one counted problem
        data = (task.get("data") or {}) if isinstance(task, dict) else None
        tid = data.get("triplet_id") if isinstance(data, dict) else None
        if isinstance(tid, bool) or not isinstance(tid, str | int) or tid == "":
            kind = "no_triplet" if isinstance(data, dict) and tid in (None, "") else "bad_record"
            problems.setdefault(kind, []).append(f"task {n}")
            continue
        anns = task.get("annotations") or []
        if not isinstance(anns, list):
            problems.setdefault("bad_record", []).append(str(tid))
            continue
        for ann in anns:
            if not isinstance(ann, dict) or not isinstance(ann.get("result") or [], list):
                problems.setdefault("bad_record", []).append(str(tid))
                continue
            cancelled = strict_bool(ann.get("was_cancelled"))  # "true" cancels; "nope" is bad
            if cancelled is None:
                problems.setdefault("bad_record", []).append(str(tid))
                continue
            if cancelled:
                continue
            picked = [
                canonical(c)
                for res in ann.get("result") or []
                if isinstance(res, dict) and res.get("type") == "choices"
                for c in _choices(res)
            ]
            if len(picked) != 1 or picked[0] is None:
                problems.setdefault("bad_choice", []).append(str(tid))
                continue
            lead = ann.get("lead_time")
            if lead is not None and finite(lead) is None:  # "fast" must not escape the floor
                problems.setdefault("bad_lead_time", []).append(str(tid))
                continue
            found.setdefault(str(tid), []).append(
                {
                    "annotator": annotator_id(ann.get("completed_by")),
                    "choice": picked[0],
                    "lead_time": finite(lead),
                }
            )
    return found, problems


def _choices(res: dict[str, Any]) -> list[Any]:
    """A choices result's picks; a wrong-typed value counts as a non-choice (bad_choice)."""
    value = res.get("value")
    got = value.get("choices") if isinstance(value, dict) else None
    return got if isinstance(got, list) else [None]


class RewardLabels(Stage[RewardConfig]):
    name = "reward_labels"
    version = "1"
    inputs = ("reward_triplets",)
    input_columns = ("triplet_id", "label", "first_reply", "second_reply")
    output_schema = SCHEMA
    key = "triplet_id"
    config_key = "reward"
    gather = True

    @property
    def lcfg(self) -> LabelsConfig:
        return self.cfg.labels

    def stage_config(self) -> Any:
        view = fingerprint_view(self.lcfg)
        rel = release_config(self)
        if rel is not None:
            return {**rel, "resolutions": view["resolutions"]}
        if self.lcfg.path:
            view["file_sha256"] = file_digest(self.lcfg.path)
            view.pop("simulate")  # not used with real labels
        return view

    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        if not self.cfg.enabled or not upstream:
            return []
        return [self.spec(SHARD, {}, upstream, {})]

    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        trips = {t["triplet_id"]: t for t in batch.to_pylist()}
        if self.cfg.release is not None:
            return self.from_release(trips)
        if self.lcfg.path:
            found, problems = read_export(self.lcfg.path)
            source, backend, model = "human", "label-studio", Path(self.lcfg.path).name
        else:
            found, problems = self.simulated(trips), {}
            source, backend, model = "simulated", "simulated", SIM_MODEL
        unknown = sorted(t for t in found if t not in trips)
        if unknown:
            problems["unknown_triplet"] = unknown
        out = [
            self.row(tid, anns, source, backend, model)
            for tid, anns in sorted(found.items())
            if tid in trips
        ]
        what = {
            "no_triplet": "task(s) of the export have no data.triplet_id",
            "bad_choice": "annotation(s) do not pick exactly one of First, Second, Tie, Both Bad",
            "unknown_triplet": "task(s) name a triplet this run does not have",
            "bad_record": "task(s) or annotation(s) have a field of the wrong type (data, "
            "annotations, result must be objects and lists; was_cancelled true or false)",
            "bad_lead_time": "annotation(s) have a lead_time that is not a number of seconds "
            "(the minimum-lead-time filter cannot apply)",
        }
        for cls, hits in problems.items():
            ex = ", ".join(clip(h, 80) for h in hits[:3]) + (", …" if len(hits) > 3 else "")
            out.append(
                {
                    "triplet_id": f"label-problem/{cls}",
                    "source": source,
                    "backend": backend,
                    "model": model,
                    "status": "error",
                    "error": f"{len(hits)} {what[cls]} and are not used ({ex})",
                    "retryable": False,
                }
            )
        return self.to_table(out)

    def from_release(self, trips: dict[str, dict[str, Any]]) -> pa.Table:
        """The release's records' annotations, voted by :meth:`row` (resolutions apply)."""
        out = []
        for r in release_rows(self, self.name):
            if r["status"] != "ok":
                out.append({**r, "backend": "release", "model": "annotation-records"})
            elif r["triplet_id"] in trips:
                anns = [{"annotator": a["annotator"], "choice": a["choice"], "lead_time": None}
                        for a in json.loads(r["annotations"])]  # fmt: skip
                out.append(self.row(r["triplet_id"], anns, r["source"], "release",
                                    "annotation-records"))  # fmt: skip
        return self.to_table(out)

    def simulated(self, trips: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        sim = self.lcfg.simulate
        out: dict[str, list[dict[str, Any]]] = {}
        for tid, t in trips.items():
            for i in range(1, sim.annotators + 1):
                rng = rng_for(self.ctx.seed, self.name, tid, i)
                choice, lead = simulate_annotator(
                    t["first_reply"], t["second_reply"], t["label"], rng, sim.noise, sim.rush
                )
                out.setdefault(tid, []).append(
                    {"annotator": f"sim-{i}", "choice": choice, "lead_time": lead}
                )
        return out

    def row(
        self, tid: str, anns: list[dict[str, Any]], source: str, backend: str, model: str
    ) -> dict[str, Any]:
        floor = self.lcfg.min_lead_time_s
        marked = [
            {**a, "dropped": a["lead_time"] is not None and a["lead_time"] < floor} for a in anns
        ]
        kept = [a["choice"] for a in marked if not a["dropped"]]
        vote = majority(kept)
        label, by = vote.label, "majority" if vote.label else None
        if vote.tied and tid in self.lcfg.resolutions:
            label, by = self.lcfg.resolutions[tid], "manual"
        return {
            "triplet_id": tid,
            "source": source,
            "label": label,
            "resolved_by": by,
            "tied": vote.tied,
            "n_annotations": len(kept),
            "n_dropped": len(marked) - len(kept),
            "votes": dumps(dict(Counter(kept))),
            "annotations": dumps(marked),
            "backend": backend,
            "model": model,
            "status": "ok",
            "stage_version": self.version,
            "elapsed_ms": 0.0,
        }
