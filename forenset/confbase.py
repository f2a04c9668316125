"""The base of every config model, and what of a config a fingerprint covers.

Kept apart from ``forenset.config`` (which assembles the build config from the stage registry)
so that stage modules and backends can define their own config models without importing the
config that imports them.

Fingerprint scope is declared on the field, not listed by hand: a field made with
``operational(...)`` (or ``json_schema_extra={"fingerprint": False}``) is left out of the
fingerprints of the shards it configures. Use it for settings that cannot change a row (rate
limits, timeouts, API-key variable names, batch sizes, devices) and for settings that decide
*which* shards exist (each shard's own params then name what it covers). Every other field is
fingerprinted, so changing it recomputes the stage and what follows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import JsonDict
from pydantic_core import to_jsonable_python

from forenset.errors import ConfigError  # noqa: F401 - re-exported (config loading's name)

NOT_FINGERPRINTED: JsonDict = {"fingerprint": False}


# scheme://<userinfo>@host...: a user name or password inside a URL (RFC 3986 userinfo)
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*)://([^/?#\s@]+)@([^/?#\s]*)")


def url_userinfo(value: Any) -> str | None:
    """``value`` with its userinfo masked (``https://***@host``) when it is text holding a URL
    with a user name or password, else None. The secret itself is never part of the answer."""
    if not isinstance(value, str) or "@" not in value or "://" not in value:
        return None
    m = _USERINFO.search(value)
    return f"{m.group(1)}://***@{m.group(3)}" if m else None


def userinfo_problem(key: str, masked: str) -> str:
    """One sentence (no final period) refusing a URL with credentials under ``key``."""
    return (
        f"{key} holds a URL with a user name or password ({masked}), which would be saved in "
        "the run directory's config.yaml and in Prefect's flow-run parameters: take credentials "
        "from the environment (AWS_*, GOOGLE_APPLICATION_CREDENTIALS, a profile, an *_env "
        "variable) or a Prefect Secret block (storage.credentials_block)"
    )


def find_userinfo(data: Any, prefix: str = "") -> tuple[str, str] | None:
    """The first (key path, masked URL) in plain config data whose text holds a URL with
    userinfo, walking dicts and lists iteratively (any depth), else None."""
    stack: list[tuple[str, Any]] = [(prefix, data)]
    while stack:
        key, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{key}.{k}" if key else str(k), v) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((f"{key}[{i}]", v) for i, v in enumerate(value))
        else:
            masked = url_userinfo(value)
            if masked:
                return key or "(top level)", masked
    return None


def repeated(names: Sequence[str]) -> list[str]:
    """The names that occur more than once, sorted: every config list keyed by name refuses
    them with its own sentence."""
    return sorted({n for n in names if names.count(n) > 1})


class Strict(BaseModel):
    """Unknown keys are errors; defaults are validated too; no field holds a URL with a user
    name or password (``https://key:secret@host``: it would be stored with the config)."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _no_url_credentials(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for k, v in data.items():
                # the model's own text values, and text in its lists and dicts; nested models
                # check their own (validation reaches them), so each value is looked at once
                if isinstance(v, dict):
                    items = [(f"{k}.{sk}", sv) for sk, sv in v.items()]
                elif isinstance(v, list | tuple):
                    items = [(f"{k}[{i}]", sv) for i, sv in enumerate(v)]
                else:
                    items = [(str(k), v)]
                for key, item in items:
                    masked = url_userinfo(item)
                    if masked:
                        raise ValueError(userinfo_problem(key, masked))
        return data


def operational(default: Any = ..., **kwargs: Any) -> Any:
    """A ``Field`` left out of fingerprints (see the module docstring for when)."""
    return Field(default, json_schema_extra=NOT_FINGERPRINTED, **kwargs)


def is_fingerprinted(model: type[BaseModel], field: str) -> bool:
    extra = model.model_fields[field].json_schema_extra
    return not (isinstance(extra, dict) and extra.get("fingerprint") is False)


def fingerprint_view(value: Any) -> Any:
    """``value`` as plain JSON data without the fields marked ``operational``, recursively."""
    if isinstance(value, BaseModel):
        cls = type(value)
        return {
            name: fingerprint_view(getattr(value, name))
            for name in cls.model_fields
            if is_fingerprinted(cls, name)
        }
    if isinstance(value, dict):
        return {str(k): fingerprint_view(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [fingerprint_view(v) for v in value]
    return to_jsonable_python(value)
