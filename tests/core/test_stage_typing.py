"""Typed stage configs (issue 30): a stage is generic in its config type, reads another stage's
section only when it declares it (``reads_config``, through ``config_of``), and what it reads
of that section is part of its shards' fingerprints."""

from __future__ import annotations

import typing
from dataclasses import replace
from typing import Any, ClassVar

import pyarrow as pa
import pytest

from forenset.backends.image.generator import GeneratorConfig
from forenset.config import BuildConfig, section, validate_config
from forenset.stages import stage_classes
from forenset.store.run_store import RunStore, ShardInfo
from forenset.tasks.base import ContractError, Stage, StageContext
from forenset.tasks.candidates import Candidates
from forenset.tasks.instructions import Instructions
from forenset.tasks.sources import Sources
from forenset.tasks.splits import Splits, SplitsConfig
from tests.conftest import small_config_dict

UPSTREAM = ShardInfo("captions", "shard-00000", "p", "fp", "cid")


def config_type(cls: type) -> Any:
    """The type argument a stage class gives ``Stage`` (through its generic bases), or None."""
    for klass in cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            origin = typing.get_origin(base)
            if isinstance(origin, type) and issubclass(origin, Stage):
                args = typing.get_args(base)
                if args and not isinstance(args[0], typing.TypeVar):
                    return args[0]
    return None


@pytest.mark.parametrize("cls", stage_classes(), ids=lambda c: c.name)
def test_every_stage_names_its_config_type(cls):
    """``Stage[C]``: C is the stage's section's type (its own ``config_model``, or the model
    of the stage owning the section it shares through ``config_key``)."""
    declared = config_type(cls)
    assert declared is not None, f"{cls.__name__} does not name its config type (Stage[...])"
    owner = next(
        c
        for c in stage_classes()
        if c.config_model is not None and c.config_section() == cls.config_section()
    )
    model = owner.config_model
    if typing.get_origin(model) is typing.Annotated:  # GeneratorPool: Annotated[list[...], ...]
        model = typing.get_args(model)[0]
    assert declared == model, f"{cls.__name__}: Stage[{declared}] but its section is {model}"


@pytest.mark.parametrize("cls", stage_classes(), ids=lambda c: c.name)
def test_read_sections_exist(cls):
    for name in cls.reads_config:
        assert name in BuildConfig.model_fields, f"{cls.name} reads unknown '{name}'"
        assert name != cls.config_section(), f"{cls.name} lists its own section"


class Reader(Stage[SplitsConfig]):
    """A toy stage reading the splits section with the default (whole-section) view."""

    name = "reader"
    config_model = SplitsConfig
    config_key = "splits"
    reads_config: ClassVar[tuple[str, ...]] = ("generators",)
    output_schema = pa.schema([("x", pa.string())])
    key = "x"


class Blind(Reader):
    reads_config: ClassVar[tuple[str, ...]] = ()


def ctx(tmp_path, **changes: Any) -> StageContext:
    d = small_config_dict(tmp_path)
    d.update(changes)
    return StageContext(store=None, config=validate_config(d))  # type: ignore[arg-type]  # planning reads no store


def fp(cls: type[Stage[Any]], context: StageContext) -> str:
    return cls(context).plan(UPSTREAM)[0].fingerprint


def test_config_of_is_typed_by_the_owner_and_needs_a_declaration(tmp_path):
    c = ctx(tmp_path)
    pool = Reader(c).config_of("generators", list[GeneratorConfig])
    assert [g.name for g in pool] == [g.name for g in c.config.generators]  # type: ignore[attr-defined]
    with pytest.raises(ContractError, match="without declaring it in reads_config"):
        Blind(c).config_of("generators", list[GeneratorConfig])
    # above the stages, the same typed read of a section
    cfg = validate_config(small_config_dict(tmp_path))
    assert section(cfg, Splits) is cfg.splits  # type: ignore[attr-defined]
    assert section(cfg, Candidates) is cfg.generators  # type: ignore[attr-defined]


def api(**over: Any) -> dict[str, Any]:
    return {"name": "oa", "backend": "openai", "openai": {"model": "gpt-image-1", **over}}


def test_a_declared_section_is_fingerprinted(tmp_path):
    one = [{"name": "cv", "family": "classical"}, api()]
    two = [*one, {"name": "cv2", "family": "classical"}]
    a, b = ctx(tmp_path, generators=one), ctx(tmp_path, generators=two)
    assert fp(Reader, a) != fp(Reader, b)  # the whole pool, by default
    assert fp(Blind, a) == fp(Blind, b)  # no reads: the pool is none of its business
    # an operational field of the read section leaves the fingerprint alone
    slow = [one[0], api(max_concurrency=1)]
    assert fp(Reader, a) == fp(Reader, ctx(tmp_path, generators=slow))
    assert fp(Reader, a) != fp(Reader, ctx(tmp_path, generators=[one[0], api(quality="low")]))


def test_builtin_views_keep_pool_changes_local(tmp_path):
    """Adding a generator of known kinds recomputes neither sources nor instructions (their
    narrowed views); an external generator's read policy is part of sources' fingerprint."""
    one = [{"name": "cv", "family": "classical"}]
    two = [*one, {"name": "cv2", "family": "classical"}]
    a, b = ctx(tmp_path, generators=one), ctx(tmp_path, generators=two)
    assert Sources(a).read_config() == {} == Sources(b).read_config()
    assert Instructions(a).read_config() == {}
    assert Instructions(a).stage_config() == Instructions(b).stage_config()
    assert fp(Instructions, a) == fp(Instructions, b)
    assert Splits(a).read_config() == {}
    listing = tmp_path / "edits" / "metadata.csv"
    listing.parent.mkdir()
    listing.write_text("source,instruction,edited\n")
    ext = {"name": "ext", "backend": "external", "family": "external"}
    e = ctx(tmp_path, generators=[*one, {**ext, "options": {"path": str(listing.parent)}}])
    view = Sources(e).read_config()["generators"]
    assert view == {
        "allow_remote": False,
        "allow_private_hosts": False,
        "roots": [str(listing.parent)],
    }
    remote = {**ext, "options": {"path": str(listing.parent), "allow_remote": True}}
    r = ctx(tmp_path, generators=[*one, remote])
    fps = [Sources(replace(x, store=RunStore(str(tmp_path / "run")))) for x in (e, r)]
    assert fps[0].plan_sources()[0].fingerprint != fps[1].plan_sources()[0].fingerprint
