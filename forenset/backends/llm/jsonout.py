"""Structured output: pull JSON out of a reply (code fences accepted) and validate it."""

from __future__ import annotations

import copy
import functools
import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def json_schema_for(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema sent to providers (pydantic's, as-is); a fresh copy per call.

    Why cached: pydantic rebuilds it on every call (~1 ms), and every request body and cache
    key needs it, on the one API loop that paces all sends.
    """
    return copy.deepcopy(_schema(model))


@functools.lru_cache(maxsize=256)
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


def extract_json(text: str) -> Any:
    """Parse the first JSON value in ``text``: bare, inside ```json fences, or embedded."""
    stripped = text.strip()
    candidates = [stripped]
    candidates += [m.strip() for m in _FENCE.findall(stripped)]
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        candidates.append(stripped[start : end + 1])
    last: json.JSONDecodeError | None = None
    for cand in candidates:
        try:
            return json.loads(cand)
        except json.JSONDecodeError as exc:
            last = exc
    raise ValueError(f"reply is not valid JSON ({last.msg if last else 'empty'})")


def parse_reply(text: str, model: type[BaseModel] | None) -> tuple[BaseModel | None, str | None]:
    """(parsed, None) on success, (None, short error) on invalid JSON or schema mismatch."""
    if model is None:
        return None, None
    try:
        data = extract_json(text)
    except ValueError as exc:
        return None, str(exc)
    try:
        return model.model_validate(data), None
    except ValidationError as exc:
        errs = exc.errors()[:5]
        detail = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in errs)
        return None, f"reply does not match the schema ({detail})"


def repair_message(error: str) -> str:
    """The follow-up user turn of a repair retry: show the model what was wrong."""
    return (
        f"Your previous reply could not be used: {error}. Reply again with only one JSON "
        "object that matches the requested schema, with no other text."
    )
