"""HF export: Parquet shards per split in the `datasets` layout, plus a dataset card.

Images are embedded as the ``Image`` feature's struct {bytes, path}; the ``features`` dict is
written into the schema metadata under ``huggingface`` (what `datasets` reads back), so
``load_dataset("parquet", data_files={split: [...]})`` yields ``Image`` and a real/fake
``ClassLabel`` without the `datasets` package being needed at export time.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from forenset.exports.data import SPLITS, write_atomic
from forenset.report.text_metrics import DIVERSITY_HEADERS, diversity
from forenset.store.run_store import RunStore

LABELS = ["real", "fake"]
IMAGE_T = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
STRING_COLS = [
    "sample_id",
    "split",
    "generator",
    "generator_family",
    "image_id",
    "caption",
    "instruction",
    "edit_kind",
    "edit_family",
    "differences",
    "explanation_complex",
    "explanation_simple",
    "explanation_authenticity",
    "license",
]
PERTURBED_T = pa.list_(
    pa.struct(
        [
            ("image", IMAGE_T),
            ("schedule", pa.string()),
            ("ops", pa.string()),
            ("op_names", pa.list_(pa.string())),
            ("psnr", pa.float64()),
            ("ssim", pa.float64()),
        ]
    )
)


def _value(dtype: str) -> dict[str, Any]:
    return {"dtype": dtype, "_type": "Value"}


def features_dict(include_perturbed: bool) -> dict[str, Any]:
    """The `datasets.Features.to_dict()` form of the export's columns (datasets >= 4 layout)."""
    f: dict[str, Any] = {
        "image": {"_type": "Image"},
        "label": {"names": LABELS, "_type": "ClassLabel"},
    }
    for c in STRING_COLS:
        f[c] = _value("string")
    f["generators"] = {"feature": _value("string"), "_type": "List"}
    f["holdout"] = _value("bool")
    f["psnr"] = _value("float64")
    f["ssim"] = _value("float64")
    if include_perturbed:
        f["perturbed"] = {
            "feature": {
                "image": {"_type": "Image"},
                "schedule": _value("string"),
                "ops": _value("string"),
                "op_names": {"feature": _value("string"), "_type": "List"},
                "psnr": _value("float64"),
                "ssim": _value("float64"),
            },
            "_type": "List",
        }
    return f


def arrow_schema(include_perturbed: bool) -> pa.Schema:
    fields = [pa.field("image", IMAGE_T), pa.field("label", pa.int64())]
    fields += [pa.field(c, pa.string()) for c in STRING_COLS]
    fields += [
        pa.field("generators", pa.list_(pa.string())),
        pa.field("holdout", pa.bool_()),
        pa.field("psnr", pa.float64()),
        pa.field("ssim", pa.float64()),
    ]
    if include_perturbed:
        fields.append(pa.field("perturbed", PERTURBED_T))
    meta = {"huggingface": json.dumps({"info": {"features": features_dict(include_perturbed)}})}
    return pa.schema(fields, metadata=meta)


def yaml_features(include_perturbed: bool) -> list[dict[str, Any]]:
    """The card's ``dataset_info.features`` list (the Hub's YAML form of the same features)."""
    out: list[dict[str, Any]] = [
        {"name": "image", "dtype": "image"},
        {
            "name": "label",
            "dtype": {"class_label": {"names": {str(i): n for i, n in enumerate(LABELS)}}},
        },
    ]
    out += [{"name": c, "dtype": "string"} for c in STRING_COLS]
    out += [
        {"name": "generators", "list": "string"},
        {"name": "holdout", "dtype": "bool"},
        {"name": "psnr", "dtype": "float64"},
        {"name": "ssim", "dtype": "float64"},
    ]
    if include_perturbed:
        out.append(
            {
                "name": "perturbed",
                "list": [
                    {"name": "image", "dtype": "image"},
                    {"name": "schedule", "dtype": "string"},
                    {"name": "ops", "dtype": "string"},
                    {"name": "op_names", "list": "string"},
                    {"name": "psnr", "dtype": "float64"},
                    {"name": "ssim", "dtype": "float64"},
                ],
            }
        )
    return out


def _image(store: RunStore, blob: str | None) -> dict[str, Any] | None:
    if not blob:
        return None
    return {"bytes": store.get_blob(blob), "path": blob.rsplit("/", 1)[-1]}


def _record(store: RunStore, s: dict[str, Any], include_perturbed: bool) -> dict[str, Any]:
    r: dict[str, Any] = {
        "image": _image(store, s["blob"]),
        "label": LABELS.index(s["label"]),
        **{c: s.get(c) for c in STRING_COLS},
        "edit_kind": s.get("kind"),
        "edit_family": s.get("family"),
        "generators": list(s.get("generators") or []),
        "holdout": bool(s.get("holdout")),
        "psnr": s.get("psnr"),
        "ssim": s.get("ssim"),
    }
    if include_perturbed:
        r["perturbed"] = [
            {
                "image": _image(store, p["blob"]),
                "schedule": p["schedule"],
                "ops": p["ops"],
                "op_names": list(p["op_names"] or []),
                "psnr": p["psnr"],
                "ssim": p["ssim"],
            }
            for p in s["perturbed"]
        ]
    return r


def export_hf(
    store: RunStore,
    samples: list[dict[str, Any]],
    out: Path,
    *,
    rows_per_group: int = 100,
    rows_per_file: int = 5000,
    include_perturbed: bool = True,
    title: str = "forenset dataset",
) -> dict[str, Any]:
    """Write ``out/data/<split>-XXXXX-of-YYYYY.parquet`` and ``out/README.md``; returns counts."""
    schema = arrow_schema(include_perturbed)
    files: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for old in (out / "data").glob("*.parquet") if (out / "data").exists() else []:
        old.unlink()  # a re-export with fewer rows must not leave stale shards behind
    for split in SPLITS:
        part = [s for s in samples if s["split"] == split]
        if not part:
            continue
        chunks = [part[i : i + rows_per_file] for i in range(0, len(part), rows_per_file)]
        names, nbytes = [], 0
        for i, chunk in enumerate(chunks):
            name = f"data/{split}-{i:05d}-of-{len(chunks):05d}.parquet"
            nbytes += _write_parquet(
                out / name,
                schema,
                (
                    [_record(store, s, include_perturbed) for s in chunk[j : j + rows_per_group]]
                    for j in range(0, len(chunk), rows_per_group)
                ),
            )
            names.append(name)
        files[split] = names
        counts[split] = len(part)
        sizes[split] = nbytes
    card = dataset_card(samples, files, counts, sizes, include_perturbed, title)
    card += funnel_card(store)
    write_atomic(out / "README.md", card)
    return {"format": "hf", "path": str(out), "counts": counts, "files": files}


def _write_parquet(path: Path, schema: pa.Schema, groups: Any) -> int:
    """Stream row groups (one per batch of records) into a temporary file, then rename it, so
    memory holds one row group of images at a time. Returns the in-memory size written."""
    import os
    import uuid

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    size = 0
    with pq.ParquetWriter(tmp, schema, compression="zstd") as w:
        for records in groups:
            t = pa.Table.from_pylist(records, schema=schema)
            w.write_table(t, row_group_size=len(records))
            size += t.nbytes
    os.replace(tmp, path)
    return size


# the per-tile and per-file parts of a licence string (scripts/fetch_real_photos.sh writes
# "<licence>; <holder> (Debian package <pkg> <version>: /<file>, tile <j>-<i>)")
_TILE = re.compile(r",?\s*\btile\s+\d+-\d+(?=\)|$)")
_WHERE = re.compile(r"\s*\([^()]*:\s*/[^()]*\)\s*$")
ACCENTS_AS_APOSTROPHE = "\u00b4`"


def clean_licence(text: str) -> str:
    """A licence string as text: an acute accent or backtick used as an apostrophe between
    letters becomes one, a stray one (after an e-mail address in a Debian copyright file) goes,
    Unicode NFC, whitespace collapsed."""
    out = []
    for i, ch in enumerate(text):
        if ch in ACCENTS_AS_APOSTROPHE:
            if 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum():
                out.append("'")
            continue
        out.append(ch)
    return " ".join(unicodedata.normalize("NFC", "".join(out)).split())


def source_licence(text: str) -> str:
    """The licence of the source photo: the string without its tile part."""
    return clean_licence(_TILE.sub("", clean_licence(text)))


def licence_holder(text: str) -> str:
    """The licence and holder: the photo's licence without where the file came from."""
    return _WHERE.sub("", source_licence(text))


def hf_license(licenses: list[str], sources: list[str] | None = None) -> dict[str, Any]:
    """The card's licence fields: an id when all sources agree on one, else ``other`` and
    ``license_details`` grouped per licence and holder (with the source photos and samples
    each covers; ``sources``: each sample's source photo id), not one entry per tile."""
    holders = [licence_holder(lic) if lic else "" for lic in licenses]
    distinct = sorted({h for h in holders if h})
    known = {"cc0-1.0", "cc-by-4.0", "cc-by-sa-4.0", "cc-by-nc-4.0", "mit", "apache-2.0"}
    if len(distinct) == 1 and distinct[0].lower() in known:
        return {"license": distinct[0].lower()}
    srcs = sources if sources is not None else [source_licence(x) for x in licenses]
    photos: dict[str, set[str]] = {}
    samples: Counter[str] = Counter()
    for h, src in zip(holders, srcs, strict=True):
        if h:
            photos.setdefault(h, set()).add(src)
            samples[h] += 1

    def one(h: str) -> str:
        k = len(photos[h])
        return f"{h} ({k} source photo{'s' if k > 1 else ''}, {samples[h]} samples)"

    return {
        "license": "other",
        "license_name": "per-source",
        "license_details": " | ".join(one(h) for h in distinct) if distinct else "unknown",
    }


def dataset_card(
    samples: list[dict[str, Any]],
    files: dict[str, list[str]],
    counts: dict[str, int],
    sizes: dict[str, int],
    include_perturbed: bool,
    title: str,
) -> str:
    gens = sorted({s["generator"] for s in samples if s["label"] == "fake" and s["generator"]})
    licenses = [s.get("license") or "" for s in samples]
    sources = [str(s.get("source_blob") or s.get("sample_id")) for s in samples]
    header: dict[str, Any] = {
        **hf_license(licenses, sources),
        "task_categories": ["image-classification", "image-to-text"],
        "tags": ["ai-generated-image-detection", "image-forensics", "explainability"],
        "pretty_name": title,
        "configs": [
            {
                "config_name": "default",
                "data_files": [
                    {"split": sp, "path": f"data/{sp}-*.parquet"} for sp in SPLITS if sp in files
                ],
            }
        ],
        "dataset_info": {
            "features": yaml_features(include_perturbed),
            "splits": [
                {"name": sp, "num_bytes": sizes[sp], "num_examples": counts[sp]}
                for sp in SPLITS
                if sp in counts
            ],
            "dataset_size": sum(sizes.values()),
        },
        "generators": gens,
    }
    by = Counter((s["split"], s["label"]) for s in samples)
    per_gen = Counter((s["split"], s["generator"]) for s in samples)
    lic = Counter(source_licence(x) for x in licenses)  # per source photo, not per tile
    lines = [
        "---",
        yaml.safe_dump(header, sort_keys=False, allow_unicode=True).rstrip(),
        "---",
        "",
        f"# {title}",
        "",
        "Real photographs and AI-edited counterparts with the evidence of each edit and "
        "natural-language explanations, built with forenset. `label` is a ClassLabel "
        "(0 = real, 1 = fake); `image` holds the PNG bytes.",
        "",
        "## Counts",
        "",
        "| split | real | fake | total |",
        "|---|---|---|---|",
    ]
    for sp in SPLITS:
        if sp in counts:
            lines.append(f"| {sp} | {by[(sp, 'real')]} | {by[(sp, 'fake')]} | {counts[sp]} |")
    lines += ["", "## Generators", "", "| split | generator | samples |", "|---|---|---|"]
    for (sp, g), n in sorted(per_gen.items()):
        lines.append(f"| {sp} | {g} | {n} |")
    lines += ["", "## Source licences", "", "| source photo licence | samples |", "|---|---|"]
    for name, n in sorted(lic.items()):
        lines.append(f"| {name or 'unknown'} | {n} |")
    lines += explanation_lines(samples)
    lines.append("")
    return "\n".join(lines)


def explanation_lines(samples: list[dict[str, Any]]) -> list[str]:
    """The card's explanation-diversity table (the HTML report's, from the exported rows):
    per split and kind, duplicates, Distinct-2 and texts repeating a 4-word phrase."""
    items = [
        (s["split"], kind, s[f"explanation_{kind}"])
        for s in samples
        for kind in ("complex", "simple", "authenticity")
        if s.get(f"explanation_{kind}")
    ]
    if not items:
        return []
    out = [
        "",
        "## Explanation diversity",
        "",
        "Duplicate share: (n - distinct texts) / n. Distinct-2: unique bigrams / bigrams. "
        "Repeated 4-gram: texts in which a 4-word phrase occurs twice.",
        "",
        "| " + " | ".join(DIVERSITY_HEADERS) + " |",
        "|" + "---|" * len(DIVERSITY_HEADERS),
    ]
    for row in diversity(items):
        out.append(
            "| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row) + " |"
        )
    return out


def funnel_card(store: Any) -> str:
    """The card's funnel section: the numbers `forenset status --funnel` prints (from the
    build's footers, forenset.funnel), and its warnings."""
    from forenset.funnel import funnel

    f = funnel(store)

    def cell(v: object) -> str:
        return "" if v is None else str(v).replace("|", "\\|")

    lines = [
        "## Funnel",
        "",
        "Rows kept at each step of the build, and why the rest were dropped.",
        "",
        "| step | group | n | of | dropped: why |",
        "|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in f.numbers()]
    lines += [""] + [f"- warning: {w}" for w in f.warnings] + ([""] if f.warnings else [])
    return "\n".join(lines)
