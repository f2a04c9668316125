"""Responders: every model a benchmark assesses, one abstraction for the benchmark families.

A responder answers questions about images: the offline forensic detector (``detector``), a
model pool (``llm``), a predictions or written-answers file (``file``, the human baseline
included) or a constant reference (``constant``). A family's model lists (detectors, policies,
models) are lists of responders, so a kind is configured, validated and run the same way in
every family (``forenset.benchmarks.common.respond`` runs them). Which shared kinds a family's
lists accept is its ``Family.responder_kinds``; a kind of its own (a benchmark's answer-file
format) is in its ``Family.responders``.

Why a registry: a kind is looked up by name, built-ins first, then the families' own kinds,
then the ``forenset.responders`` entry-point group (as image backends in ``forenset.backends.image.factory``), so a plugin
package adds a model to assess by being installed::

    [project.entry-points."forenset.responders"]
    mymodel = "my_plugin:MyResponder"

The entry point names a responder class (``respond.Responder``) whose ``Config`` is its config
model (a ``ResponderConfig`` with ``kind: Literal["mymodel"]``). :func:`register` does the same
in process (tests, notebooks). The built-ins' config models live here and their code is
imported by path, so validating a config never imports the responders' code.

Old kind names stay valid: ``offline`` is ``detector`` and ``vlm`` is ``llm`` (older names);
``belief`` is the constant's ``answer``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    SerializeAsAny,
    ValidationError,
    WrapValidator,
)

from forenset.backends.llm.types import LLMSettings
from forenset.confbase import Strict
from forenset.families import families, load_target
from forenset.plugins import entry_points_by_name

GROUP = "forenset.responders"
NAME = r"^[A-Za-z0-9_.\-]+$"
ALIASES = {"offline": "detector", "vlm": "llm"}  # old name -> canonical kind


class ResponderConfig(Strict):
    """What every responder has: a name (its rows' ``detector`` / ``policy`` / ``answerer``)
    and a kind (a registered responder)."""

    name: str = Field(pattern=NAME)
    kind: str


class DetectorResponder(ResponderConfig):
    """The offline forensic detector: forensic features + a scikit-learn classifier trained on
    a seeded draw of ``train_per_class`` per label of the train split (``common.training``).
    ``grounded: false`` (an ungrounded baseline) explains the same verdict with an ungrounded
    sentence."""

    kind: Literal["detector"] = "detector"
    classifier: Literal["logreg", "hgb"] = "logreg"
    train_per_class: int = Field(2000, ge=1)
    grounded: bool = True


class LLMResponder(ResponderConfig):
    """A model pool prompted with the family's prompt, the image attached. ``max_attempts``
    above 1 asks again when the family's parser cannot read a reply (default 1: the paper's
    zero-shot rule, an unparseable reply is a wrong answer)."""

    kind: Literal["llm"] = "llm"
    llm: LLMSettings
    max_attempts: int = Field(1, ge=1, le=10)


class FileResponder(ResponderConfig):
    """Answers written elsewhere (a user's model, the human baseline): JSONL or CSV with
    ``sample_id, answer, explanation[, simple_explanation]`` (``common.predictions``)."""

    kind: Literal["file"] = "file"
    path: str


class ConstantResponder(ResponderConfig):
    """Always ``answer`` (also spelled ``belief``), naming no evidence: the floor."""

    kind: Literal["constant"] = "constant"
    # ``belief``: the older key of a family's configs. pydantic's mypy plugin cannot see the alias
    # choices, hence the ignore (the field is optional, so the generated __init__ is unaffected).
    answer: Literal["real", "fake"] = Field(  # type: ignore[pydantic-alias]
        "real", validation_alias=AliasChoices("answer", "belief")
    )

    @property
    def belief(self) -> str:
        return self.answer


# The older name of the detector's config (the offline detector is a default kind).
DetectorConfig = DetectorResponder

# kind -> (config model, "module:Class" of the responder); the families that accept a kind say
# so (``Family.responder_kinds``)
BUILTIN: dict[str, tuple[type[ResponderConfig], str]] = {
    "detector": (DetectorResponder, "forenset.benchmarks.common.respond:DetectorAnswers"),
    "llm": (LLMResponder, "forenset.benchmarks.common.respond:LLMAnswers"),
    "file": (FileResponder, "forenset.benchmarks.common.respond:FileAnswers"),
    "constant": (ConstantResponder, "forenset.benchmarks.common.respond:ConstantAnswers"),
}


def responder_families() -> tuple[str, ...]:
    """The families with model lists (any ``Family.responder_kinds``): the ones a plugin
    responder answers for unless it names its own (``Responder.families``)."""
    return tuple(f.name for f in families() if f.responder_kinds)


def family_kinds() -> dict[str, tuple[str, str]]:
    """The families' own responder kinds: kind -> ("module:Class", family)."""
    return {k: (t, f.name) for f in families() for k, t in f.responders.items()}


_REGISTERED: dict[str, Any] = {}  # register(): kind -> responder class


def register(cls: Any) -> Any:
    """Register a responder class in process (its ``kind`` and ``Config``); usable as a
    decorator. A built-in kind cannot be replaced."""
    kind = getattr(cls, "kind", None)
    if not isinstance(kind, str) or kind in BUILTIN or kind in family_kinds() or kind in ALIASES:
        raise ValueError(f"responder kind {kind!r} is missing or taken by a built-in")
    _check_class(kind, cls)
    _REGISTERED[kind] = cls
    return cls


def unregister(kind: str) -> None:
    _REGISTERED.pop(kind, None)


def kinds() -> list[str]:
    """Every responder kind: the built-ins, the families' own, then plugins (entry points and
    :func:`register`)."""
    own = list(family_kinds())
    plugins = sorted((set(entry_points_by_name(GROUP)) | set(_REGISTERED)) - {*BUILTIN, *own})
    return [*BUILTIN, *own, *plugins]


def canonical(kind: str) -> str:
    return ALIASES.get(kind, kind)


def _check_class(kind: str, cls: Any) -> None:
    config = getattr(cls, "Config", None)
    if not (isinstance(config, type) and issubclass(config, ResponderConfig)):
        raise ValueError(f"responder {kind!r} ({cls!r}) has no Config (a ResponderConfig)")
    if not callable(getattr(cls, "answer", None)):
        raise ValueError(f"responder {kind!r} ({cls!r}) has no answer() method")


def responder_class(kind: str) -> Any:
    """The responder class of ``kind`` (imported on first use); ValueError (one sentence) for
    an unknown kind or a plugin that does not load."""
    kind = canonical(kind)
    if kind in BUILTIN:
        return load_target(BUILTIN[kind][1])
    own = family_kinds()
    if kind in own:  # before the entry points: older metadata may name an older path
        cls = load_target(own[kind][0])
        _check_class(kind, cls)
        return cls
    if kind in _REGISTERED:
        return _REGISTERED[kind]
    eps = entry_points_by_name(GROUP).get(kind)
    if not eps:
        raise ValueError(f"unknown responder kind {kind!r} (known: {', '.join(kinds())})")
    try:
        cls = eps[0].load()
    except Exception as exc:  # noqa: BLE001 - a broken plugin is a configuration error
        raise ValueError(
            f"responder {kind!r} ({eps[0].value}) could not be loaded: {type(exc).__name__}: {exc}"
        ) from exc
    _check_class(kind, cls)
    return cls


def config_class(kind: str) -> type[ResponderConfig]:
    kind = canonical(kind)
    if kind in BUILTIN:
        return BUILTIN[kind][0]
    return responder_class(kind).Config


def families_of(kind: str) -> tuple[str, ...]:
    """The families whose model lists accept ``kind``."""
    kind = canonical(kind)
    if kind in BUILTIN:
        return tuple(f.name for f in families() if kind in f.responder_kinds)
    own = family_kinds()
    if kind in own:
        return (own[kind][1],)
    return tuple(getattr(responder_class(kind), "families", ()) or responder_families())


def _one_line(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        where = ".".join(str(x) for x in err["loc"])
        parts.append(f"{where}: {err['msg']}" if where else err["msg"])
    return "; ".join(parts)


def parse(
    value: Any, family: str, default_kind: str, defaults: dict[str, dict[str, Any]]
) -> ResponderConfig:
    """One responder entry of ``family``'s list as its kind's config model."""
    if isinstance(value, ResponderConfig):
        value = value.model_dump(by_alias=False)
    if not isinstance(value, dict):
        raise ValueError("a responder is a mapping with at least 'name' (and 'kind')")
    kind = canonical(str(value.get("kind") or default_kind))
    who = f"{value.get('name', '?')}"
    cls = config_class(kind)
    if family not in families_of(kind):
        ok = [k for k in kinds() if family in families_of(k)]
        raise ValueError(
            f"{who}: kind {kind!r} does not answer {family} questions (use: {', '.join(ok)})"
        )
    data = {**defaults.get(kind, {}), **value, "kind": kind}
    if kind == "constant" and "belief" in value:
        data.pop("answer", None)  # the family default yields to the old spelling
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise ValueError(f"{who} ({kind}): {_one_line(e)}") from None


def responder_list_item(
    family: str, default_kind: str, defaults: dict[str, dict[str, Any]] | None = None
) -> Any:
    """The type of one entry of a family's responder list: a union of the registered kinds,
    discriminated by ``kind`` (``default_kind`` when absent)."""
    d = defaults or {}

    def validate(value: Any, handler: Callable[[Any], Any]) -> ResponderConfig:
        return parse(value, family, default_kind, d)

    return Annotated[SerializeAsAny[ResponderConfig], WrapValidator(validate)]


def make(family: str, default_kind: str, **fields: Any) -> ResponderConfig:
    """A responder config built in code (a family's defaults)."""
    return parse(fields, family, default_kind, {})
