"""Predictions files of the user's own model (JSONL or CSV: ``sample_id, answer, explanation``, or
a format a family converts: ``Family.predictions``), read by the ``file`` responders."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path
from typing import Any

from forenset.errors import ConfigurationError, clip
from forenset.families import families, load_target
from forenset.tasks.base import writable


def prediction_formats() -> dict[str, str]:
    """File suffixes of the benchmarks' own prediction formats -> converter to JSONL text
    (``Family.predictions``: a challenge's submission zip)."""
    return {sfx: t for f in families() for sfx, t in f.predictions.items()}


def file_digest(path: str) -> str:
    """Content hash of a predictions file (fingerprinted: new predictions recompute)."""
    from forenset.paths import read_local

    try:  # a regular file only: a FIFO named here must not hang the planning
        return hashlib.sha256(read_local(str(path))).hexdigest()
    except OSError:
        return "unreadable"


# -- predictions files ------------------------------------------------------------------------

REQUIRED = ("sample_id", "answer", "explanation")


def _examples(found: list[tuple[int, str]]) -> str:
    shown = ", ".join(f"{sid!r} at line {n}" if sid else f"line {n}" for n, sid in found[:3])
    return shown + (", …" if len(found) > 3 else "")


def _records(text: str, is_csv: bool) -> list[tuple[int, dict[str, Any] | None, str]]:
    """(line number, record or None when the line is not a record, raw text) per data line."""
    out: list[tuple[int, dict[str, Any] | None, str]] = []
    if is_csv:
        reader = csv.DictReader(io.StringIO(text))
        for entry in reader:
            raw = json.dumps(entry, ensure_ascii=False)
            clean = {k: v for k, v in entry.items() if k is not None and v not in (None, "")}
            out.append((reader.line_num, clean, raw))
        return out
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec: Any = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
            rec = None
        out.append((n, rec if isinstance(rec, dict) else None, line))
    return out


TEXT_FIELDS = ("answer", "explanation", "simple_explanation")


def _well_typed(rec: dict[str, Any]) -> bool:
    """A JSON line's fields have the types a prediction needs (a CSV's are all strings)."""
    sid = rec.get("sample_id")
    if sid is not None and (isinstance(sid, bool) or not isinstance(sid, str | int)):
        return False
    return all(rec.get(f) is None or isinstance(rec[f], str) for f in TEXT_FIELDS)


def _has_surrogates(value: Any) -> bool:
    return isinstance(value, str) and any("\udc80" <= ch <= "\udcff" for ch in value)


def read_predictions(
    path: str, known: set[str]
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The usable predictions by sample id, and one sentence per class of problem.

    Text is decoded with ``surrogateescape`` so a line with bytes that are not UTF-8 is found
    (and reported) instead of failing the whole file."""
    from forenset.paths import read_local

    p = Path(path)
    try:
        data = read_local(str(p))  # a regular file, capped in bytes before decoding
    except OSError as e:
        raise ConfigurationError(
            f"cannot read the predictions file {clip(path)}: {e.strerror or e}"
        ) from e
    converter = prediction_formats().get(p.suffix.lower())
    if converter is not None:  # a benchmark's own file format (``Family.predictions``)
        try:
            text = load_target(converter)(data)
        except ValueError as e:
            raise ConfigurationError(f"predictions file {path}: {e}") from e
        is_csv = False
        # the scorer allows a row without a label or an explanation (counted by its coverage)
        required: tuple[str, ...] = ("sample_id",)
    else:
        text = data.decode("utf-8", "surrogateescape").lstrip("\ufeff")
        is_csv = p.suffix.lower() == ".csv" or (
            p.suffix.lower() not in (".jsonl", ".json", ".ndjson")
            and not text.lstrip().startswith("{")
        )
        required = REQUIRED
    found: dict[str, list[tuple[int, str]]] = {}
    preds: dict[str, dict[str, Any]] = {}
    for n, rec, raw in _records(text, is_csv):
        if rec is None:
            found.setdefault("not_a_record", []).append((n, ""))
            continue
        sid = rec.get("sample_id")
        if not _well_typed(rec):
            found.setdefault("wrong_type", []).append((n, writable(str(sid)[:60]) if sid else ""))
            continue
        sid = str(sid) if sid is not None else ""
        if any(_has_surrogates(v) for v in (*rec.values(), *rec.keys())):
            found.setdefault("not_utf8", []).append((n, writable(sid)))
            continue
        missing = [f for f in required if rec.get(f) in (None, "")]
        if missing:
            found.setdefault("missing_fields", []).append((n, sid))
            continue
        if sid not in known:
            found.setdefault("unknown_id", []).append((n, sid))
            continue
        if sid in preds:
            found.setdefault("duplicate", []).append((n, sid))
            continue
        preds[sid] = {**rec, "sample_id": sid, "line": n, "raw": raw}
    name = p.name
    what = {
        "not_a_record": "{k} line{s} of {name} {are} not a JSON object and {are} not used ({ex})",
        "missing_fields": "{k} line{s} of {name} lack{s_} sample_id, answer or explanation and "
        "{are} not used ({ex})",
        "not_utf8": "{k} line{s} of {name} {are} not valid UTF-8 text and {are} not used ({ex})",
        "wrong_type": "{k} line{s} of {name} {have} a field of the wrong type (sample_id a "
        "string or integer; answer, explanation, simple_explanation strings) and {are} not "
        "used ({ex})",
        "unknown_id": "{k} line{s} of {name} name{s_} a sample id the stage did not ask about and "
        "{are} not used ({ex})",
        "duplicate": "{k} line{s} of {name} repeat{s_} a sample id already predicted on an "
        "earlier line; the first line is used and {these} {are} not ({ex})",
    }
    problems = {}
    for cls, hits in found.items():
        k = len(hits)
        problems[cls] = "predictions file: " + what[cls].format(
            k=k,
            s="" if k == 1 else "s",
            s_="s" if k == 1 else "",
            are="is" if k == 1 else "are",
            have="has" if k == 1 else "have",
            these="this" if k == 1 else "these",
            name=name,
            ex=_examples(hits),
        )
    return preds, problems
