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

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import JsonDict
from pydantic_core import to_jsonable_python

from forenset.errors import ConfigError  # noqa: F401 - re-exported (config loading's name)

NOT_FINGERPRINTED: JsonDict = {"fingerprint": False}


class Strict(BaseModel):
    """Unknown keys are errors; defaults are validated too."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


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
