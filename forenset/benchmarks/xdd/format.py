"""The XDD challenge's files, both ways: the submission zip and the reference JSONL.

Facts of the format, read from the organisers' scorer program (the ``xdd-scorer`` image's
``/app/program``, as copied to GitHub ``TheLukaDragar/XPlainVerse-ACMChallenge``
``evaluator_codabench/``; its code is not used here):

* a submission is a zip holding ``detection.jsonl`` (``{"id", "pred_label"}``, ``pred_label``
  a strict integer 0 = real / 1 = fake, a boolean refused), ``complex.jsonl``
  (``{"id", "complex_explanation"}``) and ``simple.jsonl`` (``{"id", "simple_explanation"}``);
  a missing file or row is allowed (it lowers the coverage), an empty explanation is skipped;
* an id that is not in the reference (after the scorer's aliases: the id, its POSIX name and
  stem), a repeated id, malformed JSON, a non-object line or a wrong type fails the whole
  submission;
* the reference is JSONL with ``id``, ``label`` (0 / 1), ``complex_reference``,
  ``simple_reference`` and ``score_explanations`` (only rows with ``true`` are explanation-scored).

:class:`Submission` is a validated submission; :func:`read_submission` validates as the scorer
does and raises :class:`XddFormatError` with one sentence where the scorer fails."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from forenset.errors import ForensetError, InputRefused
from forenset.paths import read_local, read_text_file, under

DETECTION, COMPLEX, SIMPLE = "detection.jsonl", "complex.jsonl", "simple.jsonl"
FILES = (DETECTION, COMPLEX, SIMPLE)
FIELDS = {COMPLEX: "complex_explanation", SIMPLE: "simple_explanation"}
LABELS = {"real": 0, "fake": 1}
MAX_BYTES = 512 * 1024 * 1024  # one submission file, uncompressed


class XddFormatError(ForensetError, ValueError):
    """A submission or reference the challenge's scorer would refuse (one sentence)."""


@dataclass
class Submission:
    """A validated submission: per file, canonical reference id -> value."""

    detection: dict[str, int] = field(default_factory=dict)
    complex: dict[str, str] = field(default_factory=dict)
    simple: dict[str, str] = field(default_factory=dict)


def dumps_jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    """One JSON object per line, UTF-8 text (``ensure_ascii=False``), newline-terminated."""
    return "".join(json.dumps(dict(r), ensure_ascii=False) + "\n" for r in rows)


def submission_zip(detection: Sequence[Mapping[str, Any]], complex_: Sequence[Mapping[str, Any]],
                   simple: Sequence[Mapping[str, Any]]) -> bytes:  # fmt: skip
    """The submission zip's bytes: the three files at the archive's top level."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, rows in ((DETECTION, detection), (COMPLEX, complex_), (SIMPLE, simple)):
            z.writestr(name, dumps_jsonl(rows))
    return buf.getvalue()


def parse_jsonl(text: str, source: str) -> list[dict[str, Any]]:
    """The objects of a JSONL text (blank lines skipped), or one sentence naming the line."""
    out: list[dict[str, Any]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as e:
            why = e.msg if isinstance(e, json.JSONDecodeError) else "nested too deep"
            raise XddFormatError(f"{source} line {n} is not JSON ({why})") from None
        if not isinstance(obj, dict):
            raise XddFormatError(f"{source} line {n} is not a JSON object")
        out.append(obj)
    return out


def read_reference(path: Path) -> list[dict[str, Any]]:
    """The reference rows, checked as the scorer checks them (non-empty unique string ids) and
    as scoring needs them (``label`` 0 / 1). Read under the read policy (a regular file,
    capped: :mod:`forenset.paths`)."""
    try:
        text = read_text_file(path)
    except (OSError, InputRefused) as e:
        why = e.reason if isinstance(e, InputRefused) else (e.strerror or str(e))
        raise XddFormatError(f"cannot read the reference {path}: {why}") from None
    rows = parse_jsonl(text, str(path))
    seen: set[str] = set()
    for n, r in enumerate(rows, start=1):
        rid = r.get("id")
        if not isinstance(rid, str) or not rid.strip():
            raise XddFormatError(f"reference row {n} has no non-empty string id")
        if rid in seen:
            raise XddFormatError(f"reference row {n} repeats id {rid[:200]!r}")
        seen.add(rid)
        if isinstance(r.get("label"), bool) or r.get("label") not in (0, 1):
            raise XddFormatError(f"reference row {n} ({rid[:200]!r}) has label "
                                 f"{str(r.get('label'))[:40]!r}, not 0 (real) or 1 (fake)")  # fmt: skip
    return rows


def _members(path: Path) -> dict[str, str]:
    """The submission files' texts from a zip (members matched by base name) or a folder, read
    under the read policy: a regular file, capped; a folder's files inside the folder."""
    out: dict[str, str] = {}
    try:
        if path.is_file():
            if path.suffix.lower() != ".zip":
                raise XddFormatError(f"{path} is not a submission zip")
            with zipfile.ZipFile(io.BytesIO(read_local(str(path)))) as z:
                names = [n for n in z.namelist() if not n.endswith("/")]
                for want in FILES:
                    hits = [n for n in names if PurePosixPath(n).name == want]
                    if len(hits) > 1:
                        raise XddFormatError(f"the submission zip holds {len(hits)} {want} files")
                    if hits:
                        if z.getinfo(hits[0]).file_size > MAX_BYTES:
                            raise XddFormatError(f"{want} is larger than {MAX_BYTES} bytes")
                        out[want] = z.read(hits[0]).decode("utf-8")
            return out
        if not path.is_dir():
            raise XddFormatError(f"the submission {path} does not exist or is not a file")
        for want in FILES:
            found = sorted(f for f in path.rglob(want) if f.is_file())
            if len(found) > 1:
                raise XddFormatError(f"the submission folder holds {len(found)} {want} files")
            if found:
                inside = under(str(path), found[0].relative_to(path).as_posix())
                out[want] = read_text_file(inside or str(found[0]))
        return out
    except zipfile.BadZipFile:
        raise XddFormatError(f"{path} is not a readable zip") from None
    except UnicodeDecodeError:
        raise XddFormatError(f"the submission files in {path} must be UTF-8") from None
    except InputRefused as e:
        raise XddFormatError(f"the submission {path} is refused: {e.reason}") from None
    except OSError as e:
        raise XddFormatError(f"cannot read the submission {path}: {e.strerror or e}") from None


def _aliases(sample_id: str) -> tuple[str, ...]:
    """The names the scorer also accepts for an id: the id, with / for \\, its name and stem."""
    s = sample_id.strip()
    norm = s.replace("\\", "/")
    p = PurePosixPath(norm)
    cands = [s, norm, p.name, str(p.with_suffix("")) if p.suffix else p.stem, p.stem]
    return tuple(dict.fromkeys(a for a in cands if a))


def _resolver(reference_ids: set[str]):
    alias: dict[str, str | None] = {}
    for rid in reference_ids:
        for a in _aliases(rid):
            if a in alias and alias[a] != rid:
                alias[a] = None  # ambiguous: resolves to nothing
            elif a not in alias:
                alias[a] = rid

    def resolve(sid: str) -> str | None:
        if sid in reference_ids:
            return sid
        hits = {h for a in _aliases(sid) if (h := alias.get(a)) is not None}
        return next(iter(hits)) if len(hits) == 1 else None

    return resolve


def _rows_by_id(rows: list[dict[str, Any]], source: str, key: str, resolve) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n, r in enumerate(rows, start=1):
        sid = r.get("id")
        if not isinstance(sid, str) or not sid.strip():
            raise XddFormatError(f"{source} line {n} has no non-empty id")
        rid = resolve(sid.strip())
        if rid is None:
            raise XddFormatError(f"{source} holds an id not in the reference: {sid[:200]!r}")
        if rid in out:
            raise XddFormatError(f"{source} repeats id {sid[:200]!r}")
        if key not in r:
            raise XddFormatError(f"{source} line {n} ({sid[:200]!r}) has no {key}")
        v = r[key]
        if key == "pred_label":
            if isinstance(v, bool) or not isinstance(v, int) or v not in (0, 1):
                raise XddFormatError(
                    f"{source} line {n} ({sid[:200]!r}) has pred_label {str(v)[:40]!r}; "
                    "expected the integer 0 or 1"
                )
            out[rid] = v
            continue
        if not isinstance(v, str):
            raise XddFormatError(f"{source} line {n} ({sid[:200]!r}) has a non-text {key}")
        if v.strip():  # the scorer skips empty explanations (no row, lower coverage)
            out[rid] = v
    return out


def read_submission(path: Path, reference: Sequence[Mapping[str, Any]]) -> Submission:
    """A submission zip (or folder) validated against the reference ids, as the scorer does."""
    files = _members(Path(path))
    resolve = _resolver({str(r["id"]) for r in reference})
    sub = Submission()
    if DETECTION in files:
        sub.detection = _rows_by_id(parse_jsonl(files[DETECTION], DETECTION), DETECTION,
                                    "pred_label", resolve)  # fmt: skip
    if COMPLEX in files:
        sub.complex = _rows_by_id(parse_jsonl(files[COMPLEX], COMPLEX), COMPLEX,
                                  FIELDS[COMPLEX], resolve)  # fmt: skip
    if SIMPLE in files:
        sub.simple = _rows_by_id(parse_jsonl(files[SIMPLE], SIMPLE), SIMPLE,
                                 FIELDS[SIMPLE], resolve)  # fmt: skip
    return sub


def as_predictions(data: bytes) -> str:
    """A submission zip's rows as a predictions file's JSONL (``sample_id``, ``answer``,
    ``explanation``, ``simple_explanation``), so a zip is a ``kind: file`` detector's
    predictions. An eval item id (``id/<sample>``, ``ood/<sample>``) names its sample; a line
    the scorer would refuse stays a line the predictions reader reports, not a silent drop.
    Each row is marked ``xdd``: as the scorer, a missing label is no answer and a missing
    explanation no text of that track (no fallback to the other track's)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            names = [n for n in z.namelist() if not n.endswith("/")]
            texts = {}
            for want in FILES:
                hits = [n for n in names if PurePosixPath(n).name == want]
                if hits:
                    texts[want] = z.read(hits[0]).decode("utf-8", "surrogateescape")
    except zipfile.BadZipFile:
        raise XddFormatError("the predictions zip is not a readable zip") from None
    by: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for want, key, field_ in ((DETECTION, "answer", "pred_label"),
                              (COMPLEX, "explanation", FIELDS[COMPLEX]),
                              (SIMPLE, "simple_explanation", FIELDS[SIMPLE])):  # fmt: skip
        for line in texts.get(want, "").splitlines():
            try:
                rec = json.loads(line) if line.strip() else None
            except (json.JSONDecodeError, RecursionError):
                rec = None
            if not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
                if line.strip():
                    by[f"\x00{len(by)}"] = {"__bad__": line}
                continue
            sid = sample_of(rec["id"])
            if sid not in by:
                order.append(sid)
            row = by.setdefault(sid, {"sample_id": sid, "xdd": True})
            v = rec.get(field_)
            if key == "answer":
                row[key] = {1: "fake", 0: "real"}.get(v) if type(v) is int else None
            else:
                row[key] = v
    lines = []
    for sid in order:
        lines.append(json.dumps(by[sid], ensure_ascii=False))
    lines += [v["__bad__"] for k, v in by.items() if k.startswith("\x00")]
    return "\n".join(lines) + "\n"


def sample_of(item_id: str) -> str:
    """The sample an XDD id names: forenset's export writes eval item ids (``<set>/<sample>``)."""
    head, _, rest = item_id.partition("/")
    return rest if head in ("id", "ood") and rest else item_id
