"""API keys: read from env vars named in config; scrub them from every message we keep."""

from __future__ import annotations

import os
import re
import threading

_KNOWN: set[str] = set()
_LOCK = threading.Lock()
# Provider-style tokens (sk-..., AIza...) even when masked or truncated by a server.
_TOKEN_LIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-*.]{6,}|AIza[0-9A-Za-z_\-]{10,})")


def api_key(env_name: str | None) -> str | None:
    """The key from ``env_name`` (remembered for redaction), None when unset."""
    if not env_name:
        return None
    value = os.environ.get(env_name)
    if value:
        from forenset.redact import remember

        with _LOCK:
            _KNOWN.add(value)
        remember(value)
    return value or None


def redact(text: str) -> str:
    """Replace every known key (and key-like tokens) with '***' (forenset.redact, the one
    redaction every stored text goes through)."""
    from forenset.redact import redact as redact_all

    with _LOCK:
        known = sorted(_KNOWN, key=len, reverse=True)
    for key in known:
        if key and key in text:
            text = text.replace(key, "***")
    return redact_all(_TOKEN_LIKE.sub("***", text))
