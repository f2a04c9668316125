"""One redaction of secrets for every text forenset stores: shard rows (content and error
columns alike), the LLM response cache, log lines, exports and the report (which read the
shards), and one-sentence CLI errors.

Why one place: a model that echoes the API key it was sent (a proxy's error page, a chatty
model, a fake server in a test) would otherwise put the key into captions, explanations,
judges' replies, cache files and every export. The secrets are the values of the environment
variables a config names (``api_key_env`` and every other ``*_env`` field), remembered when a
client reads them (:func:`remember`) or when a build starts (:func:`remember_config`), plus
text shaped like a provider key (``sk-…``, ``AIza…``, ``hf_…``, ``ghp_…``, ``xox?-…``,
``AKIA…``, ``Bearer …``) even when nobody configured it.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from forenset.errors import clip

MASK = "***"
MIN_SECRET = 6  # shorter values (a "1", a "test") would mask ordinary words

_KNOWN: set[str] = set()
_LOCK = threading.Lock()
_COMPILED: tuple[frozenset[str], re.Pattern[str]] | None = None

# provider-style tokens, even when masked or truncated by a server
KEY_SHAPES = (
    r"\bsk-[A-Za-z0-9_\-*.]{6,}",  # OpenAI, Anthropic (sk-ant-…), most OpenAI-compatible hosts
    r"\bAIza[0-9A-Za-z_\-]{10,}",  # Google
    r"\bhf_[A-Za-z0-9]{20,}",  # Hugging Face
    r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}",  # GitHub
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",
    r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",  # Slack
    r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key id
    r"\br8_[A-Za-z0-9]{20,}",  # Replicate
    # an HTTP bearer token (with a digit, so "bearer responsibilities" in a caption stays)
    r"\bBearer\s+[A-Za-z0-9_\-.=:/+]{3,}[0-9][A-Za-z0-9_\-.=:/+]*",
)


def remember(value: str | None) -> None:
    """Add a secret value to redact from now on (in this process)."""
    global _COMPILED
    if value and len(value) >= MIN_SECRET:
        with _LOCK:
            if value not in _KNOWN:
                _KNOWN.add(value)
                _COMPILED = None


def remember_config(data: Any) -> None:
    """Remember the values of the environment variables every ``*_env`` field of a config
    names (a pydantic model or plain data)."""
    if hasattr(data, "model_dump"):
        data = data.model_dump(mode="json")
    stack = [data]
    while stack:
        d = stack.pop()
        if isinstance(d, dict):
            for k, v in d.items():
                if isinstance(k, str) and k.endswith("_env") and isinstance(v, str):
                    remember(os.environ.get(v))
                elif isinstance(v, dict | list):
                    stack.append(v)
        elif isinstance(d, list):
            stack.extend(x for x in d if isinstance(x, dict | list))


def pattern() -> re.Pattern[str]:
    """One regex for the known secrets (longest first) and the key shapes."""
    global _COMPILED
    with _LOCK:
        known = frozenset(_KNOWN)
        if _COMPILED is not None and _COMPILED[0] == known:
            return _COMPILED[1]
    parts = [re.escape(k) for k in sorted(known, key=len, reverse=True)] + list(KEY_SHAPES)
    compiled = re.compile("|".join(f"(?:{p})" for p in parts))
    with _LOCK:
        _COMPILED = (known, compiled)
    return compiled


def redact(text: str) -> str:
    """``text`` with every known secret and key-shaped token replaced by ``***``."""
    if not text:
        return text
    return pattern().sub(MASK, text)


def redact_obj(obj: Any) -> Any:
    """Every string inside plain data (dicts, lists) redacted."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [redact_obj(v) for v in obj]
    return obj


def redact_table(table: Any) -> Any:
    """A pyarrow table with every string column redacted. Columns are tested with one
    vectorised regex match first; only a column with a hit is rewritten row by row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rx = pattern()
    cols = []
    changed = False
    for i, field in enumerate(table.schema):
        col = table.column(i)
        if (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)) and len(col):
            try:
                hit = pc.any(pc.match_substring_regex(col, rx.pattern)).as_py()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                hit = True  # a pattern RE2 cannot take: check in Python
            if hit:
                values = [None if v is None else rx.sub(MASK, v) for v in col.to_pylist()]
                col = pa.chunked_array([pa.array(values, type=field.type)])
                changed = True
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=table.schema) if changed else table


# third-party log lines that print a whole prompt (transformers' tokenizer and CLIP text
# encoders, through diffusers): kept as one line without the prompt
PROMPT_ECHOES = (
    "was truncated because",  # "The following part of your input was truncated because CLIP…"
    "Token indices sequence length is longer than",
)
LOG_CHARS = 8000  # longest log message kept (the rest is cut with a marker)
TRUNCATED = "a prompt was truncated to the text encoder's limit (its text is not logged)"
_FACTORY_INSTALLED = False


def install_log_redaction() -> None:
    """Every log record made in this process from now on is redacted, and a prompt-echoing
    truncation warning is shortened (a record factory: it sees records of every logger,
    whatever handlers Prefect or a library adds later)."""
    import logging

    global _FACTORY_INSTALLED
    with _LOCK:
        if _FACTORY_INSTALLED:
            return
        _FACTORY_INSTALLED = True
    base = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        rec = base(*args, **kwargs)
        try:
            msg = rec.getMessage()
        except Exception:  # noqa: BLE001 - a broken format string is the logger's business
            return rec
        clean = TRUNCATED if any(p in msg for p in PROMPT_ECHOES) else redact(msg)
        clean = clip(clean, LOG_CHARS)  # a record quoting a 5 MB id is not logged whole
        if clean != msg:  # records without a secret keep their msg and args as they were
            rec.msg, rec.args = clean, ()
        return rec

    logging.setLogRecordFactory(factory)
