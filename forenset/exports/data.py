"""What every export reads: one row per dataset sample (splits joined with the stage views).

Sampling (``eval_subset``, ``train_subset``, ``balanced``) ranks rows by a BLAKE2b seed of
(seed, purpose, split, sample id), so the chosen subset is reproducible and adding rows does
not reshuffle the rest.
"""

from __future__ import annotations

import json
import os
import posixpath
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from forenset.seeds import derive_seed
from forenset.store.run_store import RunStore

SPLITS = ("train", "validation", "test")


def verdict_source(store: RunStore | None = None) -> tuple[str, str]:
    """(table, score column) with Edit-Check's final verdict + ``keep`` per candidate.

    The first gate (``Stage.gate``: verdicts, several judges per candidate, aggregated) keeps it
    as ``score``: of the run as its build recorded them when ``store`` is given, else (or when
    the run records none) of the registry. Without gates it was in ``judgments`` as
    ``final_score``. Later gates narrow what reaches splits, which the export reads.
    """
    from forenset.stages import gate_names
    from forenset.store.views import gate_tables

    # a run with no gate rows recorded yet (an empty build) asks the registry
    gates = (gate_tables(store) if store is not None else []) or gate_names()
    return (gates[0], "score") if gates else ("judgments", "final_score")


def tables(store: RunStore | None = None) -> list[str]:
    return ["sources", verdict_source(store)[0], "splits", "perturbations", "explanations"]


SAMPLES_SQL = """
WITH ex AS (
  SELECT sample_id,
         max(CASE WHEN kind = 'complex' THEN text END) AS explanation_complex,
         max(CASE WHEN kind = 'simple' THEN text END) AS explanation_simple,
         max(CASE WHEN kind = 'authenticity' THEN text END) AS explanation_authenticity,
         list(DISTINCT e) FILTER (WHERE e IS NOT NULL) AS entities_mentioned
  FROM (SELECT sample_id, kind, text, unnest(coalesce(entities_mentioned, [NULL])) AS e
        FROM explanations WHERE status = 'ok')
  GROUP BY sample_id
),
src AS (SELECT image_id, any_value(license) AS license, any_value(width) AS width,
               any_value(height) AS height, any_value(name) AS source_name
        FROM sources WHERE status = 'ok' GROUP BY image_id),
jd AS (SELECT candidate_id, any_value(kind) AS kind, any_value(family) AS family,
              any_value(psnr) AS psnr, any_value(ssim) AS ssim,
              any_value({score}) AS final_score, any_value(verdict) AS verdict
       FROM {verdicts} WHERE status = 'ok' GROUP BY candidate_id)
SELECT s.sample_id, s.label, s.split, s.generator, s.generator_family, s.generators,
       s.holdout, s.image_id, s.candidate_id, s.blob, s.source_blob, s.caption, s.instruction, s.differences, s.entities,
       jd.kind, jd.family, jd.psnr, jd.ssim, jd.final_score, jd.verdict,
       src.license, src.width, src.height, src.source_name,
       ex.explanation_complex, ex.explanation_simple, ex.explanation_authenticity,
       ex.entities_mentioned
FROM splits s
LEFT JOIN ex ON ex.sample_id = s.sample_id
LEFT JOIN src ON src.image_id = s.image_id
LEFT JOIN jd ON jd.candidate_id = s.candidate_id
WHERE s.status = 'ok'
ORDER BY s.split, s.sample_id
"""

PERTURBED_SQL = """
SELECT sample_id, variant, blob, schedule, ops, op_names, psnr, ssim
FROM perturbations WHERE status = 'ok' ORDER BY sample_id, variant
"""


def load_samples(store: RunStore) -> list[dict[str, Any]]:
    """All ok samples (sorted by split, sample id) with explanations, licence and perturbed variants."""
    from forenset.store.views import connect

    table, score = verdict_source(store)
    con = connect(store, tables(store))
    cur = con.execute(SAMPLES_SQL.format(verdicts=table, score=score))
    cols = [d[0] for d in cur.description]
    samples = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    cur = con.execute(PERTURBED_SQL)
    pcols = [d[0] for d in cur.description]
    pert: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in cur.fetchall():
        row = dict(zip(pcols, r, strict=True))
        pert[row["sample_id"]].append(row)
    for s in samples:
        s["perturbed"] = pert.get(s["sample_id"], [])
        s["differences_list"] = _json_list(s.get("differences"))
        s["instruction_obj"] = _json_obj(s.get("instruction"))
    con.close()
    return samples


def _json_list(text: str | None) -> list[dict[str, Any]]:
    try:
        v = json.loads(text) if text else []
    except ValueError:
        return []
    return v if isinstance(v, list) else []


def _json_obj(text: str | None) -> dict[str, Any]:
    try:
        v = json.loads(text) if text else {}
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def rank(seed: int, purpose: str, split: str, sample_id: str) -> int:
    return derive_seed(seed, "exports", purpose, split, sample_id)


def eval_subset(
    samples: list[dict[str, Any]], n_fake: int, n_real: int, seed: int
) -> list[dict[str, Any]]:
    """Per split, the first ``n_fake`` fakes and ``n_real`` reals by seeded rank (all if fewer)."""
    return _take(samples, {"fake": n_fake, "real": n_real}, seed, "eval-subset")


def balanced(samples: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """Per split, as many fakes as reals (the smaller count of the two), chosen by seeded rank."""
    out = []
    for split in sorted({s["split"] for s in samples}):
        part = [s for s in samples if s["split"] == split]
        n = min(sum(s["label"] == "real" for s in part), sum(s["label"] == "fake" for s in part))
        out += _take(part, {"fake": n, "real": n}, seed, "balanced")
    return sorted(out, key=lambda s: (s["split"], s["sample_id"]))


def train_subset(
    samples: list[dict[str, Any]], fraction: float, seed: int, eligible: Any = None
) -> list[dict[str, Any]]:
    """App. 16's fine-tuning set: ``fraction`` of the training split, half real and half fake
    (each half capped by what there is, then both cut to the smaller), chosen by seeded rank
    among the ``eligible`` samples; the other splits are kept whole."""
    train = [s for s in samples if s["split"] == "train" and (eligible is None or eligible(s))]
    per_label = int(round(fraction * sum(s["split"] == "train" for s in samples) / 2))
    n = min(per_label, *(sum(s["label"] == lab for s in train) for lab in ("real", "fake")))
    chosen = _take(train, {"fake": n, "real": n}, seed, "train_subset")
    rest = [s for s in samples if s["split"] != "train"]
    return sorted(chosen + rest, key=lambda s: (s["split"], s["sample_id"]))


def _take(
    samples: list[dict[str, Any]], quota: dict[str, int], seed: int, purpose: str
) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for s in samples:
        groups[(s["split"], s["label"])].append(s)
    out = []
    for (split, label), rows in groups.items():
        rows = sorted(rows, key=lambda s: rank(seed, purpose, split, s["sample_id"]))
        out += rows[: quota.get(label, 0)]
    return sorted(out, key=lambda s: (s["split"], s["sample_id"]))


def select(
    samples: list[dict[str, Any]], subset: tuple[int, int] | None, seed: int
) -> list[dict[str, Any]]:
    return eval_subset(samples, subset[0], subset[1], seed) if subset else samples


# -- writing -------------------------------------------------------------------------------


def write_atomic(path: Path, data: bytes | str) -> None:
    """Temporary sibling + rename, so a killed export never leaves a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    os.replace(tmp, path)


def _siblings(out: Path, kind: str) -> list[Path]:
    return sorted(out.parent.glob(f".{out.name}.{kind}-*")) if out.parent.exists() else []


def recover_export(out: Path) -> None:
    """Undo what a killed export left beside ``out``: a staging folder (never swapped in) is
    removed; if the kill fell between the two renames of a swap, the previous export (kept as
    ``.<name>.old-…``) is moved back."""
    import shutil

    for stale in _siblings(out, "staging"):
        shutil.rmtree(stale, ignore_errors=True)
    olds = _siblings(out, "old")
    if olds and not out.exists():
        os.replace(olds[-1], out)
        olds = olds[:-1]
    for old in olds:
        shutil.rmtree(old, ignore_errors=True)


def stage_export(out: Path) -> Path:
    """A staging folder beside ``out`` that starts as a copy of the previous export made of
    hard links (images written once stay written; every exporter writes by rename, so a
    linked file of the old export is never changed in place)."""
    import shutil

    out.parent.mkdir(parents=True, exist_ok=True)
    recover_export(out)
    stage = out.parent / f".{out.name}.staging-{uuid.uuid4().hex[:8]}"
    if out.is_dir():

        def link(src: str, dst: str) -> None:
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)

        shutil.copytree(out, stage, copy_function=link, symlinks=True)
    else:
        stage.mkdir()
    return stage


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), exchange) == 0


def swap_in(stage: Path, out: Path) -> None:
    """Make the finished ``stage`` folder the export at ``out``: one atomic exchange where the
    OS has it, else two renames (a kill between them is undone by ``recover_export``)."""
    import shutil

    if not out.exists():
        os.replace(stage, out)
        return
    if _exchange(stage, out):
        shutil.rmtree(stage, ignore_errors=True)  # now holds the previous export
        return
    old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
    os.replace(out, old)
    os.replace(stage, out)
    shutil.rmtree(old, ignore_errors=True)


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def image_relpath(blob: str) -> str:
    """Where an image lands inside an export: images/<content hash>.<ext> (written once)."""
    return posixpath.join("images", posixpath.basename(blob))


def write_images(store: RunStore, blobs: list[str], out: Path) -> dict[str, str]:
    """Copy each distinct blob to ``out/images/`` once; returns blob -> relative path."""
    refs: dict[str, str] = {}
    for b in blobs:
        if not b or b in refs:
            continue
        rel = image_relpath(b)
        dest = out / rel
        if not dest.exists():
            write_atomic(dest, store.get_blob(b))
        refs[b] = rel
    return refs


def default_out(store: RunStore, fmt: str) -> Path:
    if not store.is_local:
        raise ValueError("the run directory is remote: pass --out with a local export folder")
    return Path(store.path("exports", fmt))
