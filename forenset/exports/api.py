"""One entry point per export format, shared by the CLI and the build's export step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from forenset.exports.data import (
    balanced,
    default_out,
    load_samples,
    select,
    stage_export,
    swap_in,
    train_subset,
    write_atomic,
)
from forenset.exports.formats import formats
from forenset.exports.hf import export_hf
from forenset.exports.labelstudio import export_labelstudio
from forenset.exports.settings import ExportSettings, parse_eval_subset
from forenset.exports.sft import export_sft, has_both_tracks
from forenset.families import families, load_target
from forenset.store.run_store import RunStore


def build_seed(store: RunStore) -> int:
    """The seed of the build that wrote the run directory (0 when no config was saved)."""
    try:
        cfg = yaml.safe_load(store.read_bytes("config.yaml").decode("utf-8")) or {}
    except FileNotFoundError:
        return 0
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise ValueError(
            f"{store.path('config.yaml')} is not a readable build config ({e})"
        ) from None
    seed = cfg.get("seed", 0) if isinstance(cfg, dict) else None
    if isinstance(seed, bool) or not isinstance(seed, int | type(None)):
        raise ValueError(f"{store.path('config.yaml')} holds no integer seed")
    return int(seed or 0)


def drop_missing_images(
    store: RunStore, samples: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Leave out samples whose image blob is gone (named in the summary, not a crash), and
    perturbed variants whose blob is gone."""
    seen: dict[str, bool] = {}

    def ok(blob: str | None) -> bool:
        if not blob:
            return False
        if blob not in seen:
            seen[blob] = store.exists(blob)
        return seen[blob]

    kept, missing = [], []
    for s in samples:
        if not ok(s["blob"]):
            missing.append(s["sample_id"])
            continue
        if any(not ok(p["blob"]) for p in s["perturbed"]):
            s = {**s, "perturbed": [p for p in s["perturbed"] if ok(p["blob"])]}
        kept.append(s)
    return kept, missing


def run_export(
    store: RunStore,
    fmt: str,
    out: Path | None = None,
    settings: ExportSettings | None = None,
    samples: list[dict[str, Any]] | None = None,
    partial: str | None = None,
) -> dict[str, Any]:
    """Export the run in ``fmt`` (hf | sft | labelstudio | a family's: ``Family.exports``) to
    ``out``; returns a summary.

    ``samples`` lets a caller that exports several formats load the views once. ``partial``
    (why the build had failed shards) labels the export partial in export.json and the card.
    """
    if fmt not in formats():
        raise ValueError(f"unknown export format {fmt!r} (choose from {', '.join(formats())})")
    st = settings or ExportSettings()
    seed = st.seed if st.seed is not None else build_seed(store)
    out = Path(out) if out else default_out(store, fmt)
    rows = samples if samples is not None else load_samples(store)
    rows, missing = drop_missing_images(store, rows)
    rows = select(rows, parse_eval_subset(st.eval_subset), seed)
    if fmt == "sft" and st.balanced:
        rows = balanced(rows, seed)
    if fmt == "sft" and st.train_fraction is not None:
        rows = train_subset(rows, st.train_fraction, seed, has_both_tracks)
    # written beside the previous export and swapped in when complete: a killed export leaves
    # the previous one whole, its export.json and card consistent with its files
    final, out = out, stage_export(out)
    try:
        if fmt == "hf":
            res = export_hf(
                store,
                rows,
                out,
                rows_per_group=st.rows_per_group,
                rows_per_file=st.rows_per_file,
                include_perturbed=st.include_perturbed,
            )
        elif fmt == "sft":
            res = export_sft(store, rows, out)
        elif fmt == "labelstudio":
            res = export_labelstudio(store, rows, out, image_url_prefix=st.image_url_prefix)
        else:  # a family's format: exporter(store, samples, out, seed=...)
            target = next(f.exports[fmt] for f in families() if fmt in f.exports)
            res = load_target(target)(store, rows, out, seed=seed)
        res["path"] = str(final)
        res["samples"] = len(rows)
        res["missing_images"] = missing
        res["settings"] = st.model_dump(mode="json")
        res["seed"] = seed
        res["partial"] = partial is not None
        if partial is not None:
            res["partial_reason"] = partial
            label_partial_card(out / "README.md", partial)
        write_atomic(out / "export.json", json.dumps(res, indent=1, sort_keys=True, default=str))
        swap_in(out, final)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return res


def label_partial_card(card: Path, reason: str) -> None:
    """Mark a dataset card as a partial export (``partial: true`` in its YAML header and a
    warning on top), so it is never taken for the dataset."""
    if not card.exists():
        return
    text = card.read_text()
    note = (
        f"> **Partial export.** The build that wrote it had failed shards ({reason}). "
        "This is not the whole dataset: rerun the build to complete it.\n\n"
    )
    if text.startswith("---\n"):
        end = text.index("\n---", 4)
        text = (
            text[:end]
            + "\npartial: true"
            + text[end : end + 4]
            + "\n\n"
            + note
            + text[end + 4 :].lstrip("\n")
        )
    else:
        text = note + text
    write_atomic(card, text)
