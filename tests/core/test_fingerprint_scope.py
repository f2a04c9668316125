"""Fingerprint scope is declared on config fields, and the declaration is what happens.

For every scalar field of the build config (with every optional block filled in: model pools,
image-API and diffusers generators), change its value and plan one shard of every stage: a
field marked ``operational`` must leave every fingerprint as it was (nothing recomputes), any
other field must change the fingerprint of at least one stage (its stage recomputes).
"""

from __future__ import annotations

import copy
import typing
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from forenset.confbase import ConfigError, is_fingerprinted
from forenset.config import BuildConfig, validate_config
from forenset.stages import stage_classes
from forenset.store.run_store import ShardInfo
from forenset.tasks.base import StageContext
from tests.conftest import small_config_dict

POOL = {"pool": [{"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}]}
# config keys not owned by a stage (the export step fingerprints its section itself)
NOT_STAGE = {"export"}


def full_config(tmp_path) -> dict[str, Any]:
    d = small_config_dict(tmp_path)
    for s in ("captions", "instructions", "diffs", "judgments", "explanations", "scenarios"):
        d[s] = {**d.get(s, {}), "llm": copy.deepcopy(POOL)}
    d["prompts"] = {**d.get("prompts", {}), "llm": copy.deepcopy(POOL)}
    d["generators"] = [
        {"name": "cv", "family": "classical"},
        {"name": "oa", "backend": "openai", "family": "api", "openai": {"model": "gpt-image-1"}},
        {"name": "gm", "backend": "gemini", "family": "api", "gemini": {}},
        {
            "name": "df",
            "backend": "diffusers",
            "family": "sd",
            "diffusers": {"pipeline": "StableDiffusionPipeline", "tiny": True, "device": "cpu"},
        },
    ]
    return d


def fingerprints(cfg: Any) -> dict[str, str]:
    """One planned shard of every stage (and one per generator and task for candidates)."""
    ctx = StageContext(store=None, config=cfg)
    out: dict[str, str] = {}
    for cls in stage_classes():
        stage = cls(ctx)
        if cls.name == "candidates":
            for up in ("instructions", "prompts"):
                info = ShardInfo(up, "shard-00000", "p", "fp", "cid")
                for spec in stage.plan(info):
                    out[f"candidates/{up}/{spec.partition['generator']}"] = spec.fingerprint
        else:
            out[cls.name] = stage.spec("shard-00000", {}, [], {}).fingerprint
    return out


def leaves(model: BaseModel, path: tuple = (), marked: bool = True):
    """(path, value, annotation, fingerprinted) of every scalar field, through nested models
    and lists of models."""
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        fp = marked and is_fingerprinted(type(model), name)
        if isinstance(value, BaseModel):
            yield from leaves(value, (*path, name), fp)
        elif isinstance(value, list) and value and all(isinstance(v, BaseModel) for v in value):
            for i, v in enumerate(value):
                yield from leaves(v, (*path, name, i), fp)
        else:
            yield (*path, name), value, field.annotation, fp


def alternatives(value: Any, annotation: Any) -> list[Any]:
    """Other values of the field's type to try, first the likeliest to validate."""
    args = typing.get_args(annotation)
    literals = [a for a in args if typing.get_origin(a) is Literal] or (
        [annotation] if typing.get_origin(annotation) is Literal else []
    )
    for lit in literals:
        others = [v for v in typing.get_args(lit) if v != value]
        if others:
            return others
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value - 1, value * 2]
    if isinstance(value, float):
        return [value * 0.5 + 0.01, value + 0.5, value * 2 + 1]
    if isinstance(value, str):
        return [value + "x", value[:-1] or "a"]
    if value is None:
        if float in args or int in args:
            return [1.0, 2]
        if str in args:
            return ["v1"]
        return []
    return []  # dicts, tuples, lists of scalars: not mutated here


def set_path(d: Any, path: tuple, value: Any) -> None:
    for p in path[:-1]:
        d = d[p]
    d[path[-1]] = value


@pytest.mark.slow  # several builds
def test_operational_fields_recompute_nothing_and_the_rest_recompute(tmp_path):
    base_dict = full_config(tmp_path / "r")
    base = validate_config(base_dict)
    base_fp = fingerprints(base)
    dumped = base.model_dump(mode="json")
    tested = {"operational": 0, "fingerprinted": 0}
    wrong: list[str] = []
    for path, value, annotation, fp in leaves(base):
        if path[0] in NOT_STAGE:
            continue
        for alt in alternatives(value, annotation):
            d = copy.deepcopy(dumped)
            set_path(d, path, alt)
            try:
                changed = fingerprints(validate_config(d)) != base_fp
            except (ConfigError, KeyError, ValueError):  # e.g. a prompts_dir that does not exist
                continue
            if changed != fp:
                what = "recomputes" if changed else "recomputes nothing"
                kind = "operational" if not fp else "fingerprinted"
                wrong.append(f"{'.'.join(map(str, path))} ({kind}) {what}")
            tested["fingerprinted" if fp else "operational"] += 1
            break
    assert not wrong, "\n".join(wrong)
    # the walk reached the operational knobs of pools, image APIs and diffusers, and the rest
    assert tested["operational"] >= 40 and tested["fingerprinted"] >= 60, tested


@pytest.mark.parametrize(
    "path",
    [
        ("captions", "llm", "pool", 0, "rpm"),
        ("generators", 1, "openai", "timeout_s"),
        ("generators", 3, "diffusers", "batch_size"),
        ("runners", "default", "max_workers"),
    ],
)
def test_known_operational_fields_are_marked(tmp_path, path):
    base = validate_config(full_config(tmp_path / "r"))
    d = base.model_dump(mode="json")
    set_path(d, path, 7)
    assert fingerprints(validate_config(d)) == fingerprints(base)


def test_seed_and_a_threshold_recompute(tmp_path):
    base = validate_config(full_config(tmp_path / "r"))
    fp = fingerprints(base)
    reseeded = fingerprints(base.model_copy(update={"seed": base.seed + 1}))
    assert all(reseeded[k] != fp[k] for k in fp)  # every stage draws from the seed
    d = base.model_dump(mode="json")
    d["verdicts"]["keep_score"] = 0.7
    changed = {k for k, v in fingerprints(BuildConfig.model_validate(d)).items() if v != fp[k]}
    assert changed == {"verdicts"}
