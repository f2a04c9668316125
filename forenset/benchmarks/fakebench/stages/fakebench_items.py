"""fakebench_items: the FakeClass, FakeClue and FakeQA items of FakeBench (§3.3–3.5).

A gathering stage (one shard, planned once every splits and diffs shard is in) that draws
``fakes`` fake and ``reals`` real samples of one split by a seeded ranking (a larger set contains
the smaller one) and writes three kinds of items:

* **FakeClass** (§3.3, basic mode): one closed question per image. Forms are balanced over the
  set, separately among fakes and among reals so that the form says nothing about the label:
  "Is this a fake image?" / "Is this a real image?" (answers yes / no) alternate with "What is
  the authenticity of this image?" (answers real / fake). Scored by the exact-match rule of
  §3.2 (:func:`forenset.benchmarks.fakebench.text.exact_match`).
* **FakeClue** (§3.4): per fake, the golden clue C, a coherent flow of telltale clues in the 14
  dimensions. With ``fakebench.author`` set, a model writes them in *fault-finding mode*: the
  image attached, its authenticity told ("This is a fake image, explain why."), few-shot
  demonstrations in the prompt (template ``fakebench_fault_finding``), at most
  ``clues_per_image`` clues (five in the paper). Without an author, the clues are written from the
  sample's measured differences (the diff stage's records, offline pixel differencer or VLM),
  each mapped to dimensions by its change type and the edit kind; those rows say
  ``golden_source = offline-diff`` and ``backend = offline``. People then verify and supplement
  them (the paper's humans-in-the-loop): ``forenset fakebench-export --labelstudio`` writes a task
  per fake with the clue to edit, and ``fakebench.clue_edits`` names the Label Studio JSON export;
  an edited clue replaces C (``golden_source = human-edited``). The evaluated models answer in
  *inference mode* (item ``fakeclue/<sid>``, form ``inference``: reasoning, then the verdict)
  and, with ``clue_modes`` listing ``fault_finding``, in *fault-finding mode* too (item
  ``fakeclue/<sid>/fault_finding``: told the image is fake, zero-shot; the paper's
  interpretation ability), both scored against the same C.
* **FakeQA** (§3.5, free mode): per fake and per dimension its clues cover, the open question
  "How is the <dimension> regarding the authenticity of this image?" with the clues of that
  dimension as the golden answer. Human edits of C are free text and do not split into
  dimensions, so FakeQA keeps the author's per-dimension answers.

A fake whose golden clues cannot be written (a failed author call, no measured difference) gets
an error row for its FakeClue item, with the reason, and no FakeQA items.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from forenset.benchmarks.common.predictions import file_digest
from forenset.benchmarks.fakebench import text as fb
from forenset.benchmarks.fakebench.config import (
    AUTHOR_TEMPLATE,
    OFFLINE_MODEL,
    SHARD,
    FakeBenchConfig,
)
from forenset.benchmarks.fakebench.schemas.fakebench_items import SCHEMA
from forenset.confbase import fingerprint_view
from forenset.errors import ConfigurationError
from forenset.seeds import derive_seed
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import ShardSpec, Stage, describe, writable
from forenset.tasks.modelcall import USAGE, call_validated, request, template_hashes


def ranked(rows: list[dict[str, Any]], seed: int, n: int) -> list[dict[str, Any]]:
    """The first ``n`` of a seeded ranking of sample ids."""
    key = lambda r: (derive_seed(seed, "fakebench_items", r["sample_id"]), r["sample_id"])  # noqa: E731
    return sorted(rows, key=key)[:n]


# One fake's golden clues: (sample, its clues or None, trace columns incl. the error when None).
Made = tuple[dict[str, Any], list[dict[str, Any]] | None, dict[str, Any]]


class FakeBenchItems(Stage[FakeBenchConfig]):
    name = "fakebench_items"
    version = "1"
    inputs = ("splits", "diffs")
    input_columns = {
        "splits": (
            "sample_id", "label", "split", "generator", "generator_family", "blob",
            "candidate_id", "differences",
        ),
        "diffs": ("candidate_id", "kind"),
    }  # fmt: skip
    output_schema = SCHEMA
    key = "item_id"
    config_model = FakeBenchConfig
    config_key = "fakebench"
    gather = True

    ITEM_FIELDS = (
        "enabled", "split", "fakes", "reals", "clues_per_image", "author", "max_attempts",
        "clue_modes", "official",
    )  # fmt: skip

    @property
    def fcfg(self) -> FakeBenchConfig:
        return self.cfg

    def stage_config(self) -> Any:
        view = fingerprint_view(self.fcfg)
        out = {k: view[k] for k in self.ITEM_FIELDS}
        if self.fcfg.author is not None:
            out["templates"] = template_hashes([AUTHOR_TEMPLATE], self.fcfg.prompts_dir)
        if self.fcfg.clue_edits:
            out["clue_edits_sha256"] = file_digest(self.fcfg.clue_edits)
        if self.fcfg.official is not None:
            from forenset.benchmarks.fakebench.official import QUERY_FILES, files_digest

            out["official_sha256"] = files_digest(
                self.fcfg.official.queries, list(QUERY_FILES.values())
            )
        return out

    def plan_gathered(self, upstream: list[ShardInfo]) -> list[ShardSpec]:
        if not self.fcfg.enabled:
            return []
        if self.fcfg.official is None and not any(u.stage == "splits" for u in upstream):
            return []
        return [self.spec(SHARD, {}, upstream, {})]

    def read_inputs(self, shard: ShardSpec) -> pa.Table:
        """Each input's declared columns, tagged with the stage they came from (``input``)."""
        rows: list[dict[str, Any]] = []
        for info in shard.inputs:
            one = ShardSpec(shard.stage, shard.shard_id, shard.partition, [info], shard.params)
            rows.extend({**r, "input": info.stage} for r in super().read_inputs(one).to_pylist())
        if not rows:
            return pa.table({"input": pa.array([], pa.string())})
        names = list(dict.fromkeys(k for r in rows for k in r))  # from_pylist reads row 0's keys
        return pa.Table.from_pylist([{k: r.get(k) for k in names} for r in rows])

    # -- processing ---------------------------------------------------------------------------
    def process(self, batch: pa.Table, shard: ShardSpec | None = None) -> pa.Table:
        c = self.fcfg
        if c.official is not None:  # the release's items, not the run's
            from forenset.benchmarks.fakebench.official import release_items

            got = release_items(self.ctx.store, c.official.queries, c.official.images, c.clue_modes)
            for r in got:
                r.setdefault("status", "ok")
                r["stage_version"] = self.version
            return self.to_table(got)
        rows = batch.to_pylist()
        kinds = {r["candidate_id"]: r.get("kind") for r in rows if r["input"] == "diffs"}
        pool = [r for r in rows if r["input"] == "splits" and r.get("split") == c.split]
        fakes = ranked([r for r in pool if r["label"] == "fake"], self.ctx.seed, c.fakes)
        reals = ranked([r for r in pool if r["label"] == "real"], self.ctx.seed, c.reals)
        out = self.fakeclass(fakes) + self.fakeclass(reals)
        edits = self.edits()
        used: set[str] = set()
        for rank, (s, clues, trace) in enumerate(self.golden(fakes, kinds)):
            if clues is not None and s["sample_id"] in edits:
                used.add(s["sample_id"])
            out.extend(self.clue_items(s, rank, clues, trace, edits.get(s["sample_id"])))
        unused = sorted(set(edits) - used)
        if unused:  # never dropped silently: one error row says which edits were not applied
            k = len(unused)
            shown = ", ".join(unused[:3]) + (", …" if k > 3 else "")
            out.append(
                {
                    "item_id": "fakeclue/clue-edits-not-applied",
                    "task": "fakeclue",
                    "status": "error",
                    "error": f"{k} edited clue{'s' if k > 1 else ''} in "
                    f"{Path(c.clue_edits or '').name} name{'' if k > 1 else 's'} no fake with a "
                    f"FakeClue item of this set and {'are' if k > 1 else 'is'} not used ({shown})",
                    "retryable": False,
                }
            )
        for r in out:
            r.setdefault("status", "ok")
            r["stage_version"] = self.version
        return self.to_table(out)

    def base(self, s: dict[str, Any], task: str, rank: int) -> dict[str, Any]:
        return {
            "task": task,
            "sample_id": s["sample_id"],
            "label": s["label"],
            "generator": s.get("generator"),
            "generator_family": s.get("generator_family"),
            "blob": s["blob"],
            "rank": rank,
            "dimension": None,
            "dimensions": None,
            "clues": None,
        }

    def fakeclass(self, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for rank, (s, (form, polarity)) in enumerate(
            zip(samples, fb.fakeclass_forms(len(samples)), strict=True)
        ):
            question, answer = fb.fakeclass_question(form, polarity, s["label"])
            out.append(
                {
                    **self.base(s, "fakeclass", rank),
                    "item_id": f"fakeclass/{s['sample_id']}",
                    "form": form,
                    "question": question,
                    "answer": answer,
                    "golden_source": "label",
                    "backend": "rules",
                }
            )
        return out

    def edits(self) -> dict[str, str]:
        path = self.fcfg.clue_edits
        if not path:
            return {}
        try:
            return fb.read_clue_edits(Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise ConfigurationError(f"cannot read fakebench.clue_edits {path}: {e}") from e
        except ValueError as e:
            raise ConfigurationError(
                f"fakebench.clue_edits {path} is not a Label Studio JSON export: {e}"
            ) from e

    # -- golden clues -------------------------------------------------------------------------
    def golden(
        self, fakes: list[dict[str, Any]], kinds: dict[str, Any]
    ) -> list[tuple[dict[str, Any], list[dict[str, Any]] | None, dict[str, Any]]]:
        """Per fake: (sample, its clues or None, trace columns incl. the error when None)."""
        if self.fcfg.author is None:
            out: list[Made] = []
            for s in fakes:
                try:
                    diffs = json.loads(s.get("differences") or "[]")
                except ValueError:
                    diffs = []
                kind = kinds.get(s.get("candidate_id") or "")
                clues = fb.offline_clues(diffs, kind, self.fcfg.clues_per_image)
                trace: dict[str, Any] = {"backend": "offline", "model": OFFLINE_MODEL}
                if not clues:
                    trace.update(
                        status="error",
                        error="no measured difference maps to a clue dimension, so no golden "
                        "clue can be written offline",
                        retryable=False,
                    )
                out.append((s, clues or None, trace))
            return out
        return self.authored(fakes)

    def authored(
        self, fakes: list[dict[str, Any]]
    ) -> list[tuple[dict[str, Any], list[dict[str, Any]] | None, dict[str, Any]]]:
        c = self.fcfg
        assert c.author is not None
        n = c.clues_per_image

        def check(parsed: Any) -> list[str]:
            k = len(parsed.clues)
            return [f"give at most {n} clues, not {k}"] if k > n else []

        reqs, out_err = [], {}
        for s in fakes:
            try:
                image = self.ctx.store.get_blob(s["blob"])
            except Exception as e:  # noqa: BLE001 - one missing blob must not fail the set
                out_err[s["sample_id"]] = describe(e)
                continue
            req = request(
                self.name,
                s["sample_id"],
                AUTHOR_TEMPLATE,
                c.prompts_dir,
                images=[image],
                response_model=fb.FakeClueSet,
                dimensions=", ".join(fb.DIMENSIONS),
                n_clues=n,
                schema=json.dumps(fb.FakeClueSet.model_json_schema(), sort_keys=True),
            )
            reqs.append((req, check))
        got = call_validated(self.ctx, self.name, c.author, reqs, c.max_attempts) if reqs else {}
        made: list[Made] = []
        for s in fakes:
            sid = s["sample_id"]
            if sid in out_err:
                err = {"status": "error", "error": writable(out_err[sid]), "retryable": True}
                made.append((s, None, err))
                continue
            o = got[sid]
            made.append(
                (s, [x.model_dump() for x in o.parsed().clues] if o.ok else None, o.trace())
            )
        return made

    def clue_items(
        self,
        s: dict[str, Any],
        rank: int,
        clues: list[dict[str, str]] | None,
        trace: dict[str, Any],
        edited: str | None,
    ) -> list[dict[str, Any]]:
        source = "model" if self.fcfg.author is not None else "offline-diff"
        clue = {
            **self.base(s, "fakeclue", rank),
            **trace,
            "item_id": f"fakeclue/{s['sample_id']}",
            "form": "inference",
            "question": fb.INFERENCE_QUESTION,
            "golden_source": source,
        }
        if clues is None:
            return [{**clue, "answer": None}]
        dims = list(dict.fromkeys(c["dimension"] for c in clues))
        clue.update(
            answer=edited or fb.clue_text(clues),
            dimensions=dims,
            clues=json.dumps(clues, ensure_ascii=False),
            golden_source="human-edited" if edited else source,
        )
        out = [clue]
        if "fault_finding" in self.fcfg.clue_modes:  # interpretation: authenticity told
            out.append(
                {
                    **clue,
                    "item_id": f"fakeclue/{s['sample_id']}/fault_finding",
                    "form": "fault_finding",
                    "question": fb.FAULT_FINDING_QUESTION,
                    **{k: None for k in USAGE},  # the author's usage is on the first row
                }
            )
        if "inference" not in self.fcfg.clue_modes:
            out.pop(0)
        for dim, text in fb.by_dimension(clues).items():
            out.append(
                {
                    **self.base(s, "fakeqa", rank),
                    "item_id": f"fakeqa/{s['sample_id']}/{dim}",
                    "form": "free",
                    "question": fb.fakeqa_question(dim),
                    "answer": text,
                    "dimension": dim,
                    "golden_source": source,
                    "backend": trace.get("backend"),
                    "model": trace.get("model"),
                }
            )
        return out
