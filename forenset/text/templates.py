"""Prompt templates as files: load by id, render with ``string.Template`` placeholders.

A template file is YAML with ``id``, ``version``, ``system``, ``user`` (``$name`` placeholders)
and optionally ``response_model`` and ``max_tokens`` (the reply's room, sized to what it asks
for: a judgment needs far fewer tokens than a list of scenarios; a stage's ``llm.max_tokens``
overrides it). Its ``content_hash`` is the sha256 of the file bytes, so any
edit to a template changes the hash that rows record and stage fingerprints include.
"""

from __future__ import annotations

import hashlib
import json
import string
from dataclasses import dataclass, field
from pathlib import Path

import yaml

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"
# Names the renderer fills itself when a template uses them.
AUTO_VARS = frozenset({"schema"})


@dataclass(frozen=True)
class Template:
    """One prompt template; ``prompt_id`` is ``id@version``."""

    id: str
    version: int
    system: str
    user: str
    content_hash: str
    path: str
    task: str = ""
    description: str = ""
    response_model: str | None = None
    variables: frozenset[str] = field(default_factory=frozenset)
    max_tokens: int | None = None  # the reply's room, sized to its schema

    @property
    def prompt_id(self) -> str:
        return f"{self.id}@{self.version}"


def _placeholders(text: str) -> set[str]:
    names = set()
    for m in string.Template.pattern.finditer(text):
        name = m.group("named") or m.group("braced")
        if name:
            names.add(name)
        elif m.group("invalid") is not None:
            raise ValueError(f"invalid '$' placeholder near: {text[m.start() : m.start() + 20]!r}")
    return names


def _resolve(template_id: str, root: str | Path | None) -> Path:
    base = Path(root) if root is not None else PROMPTS_DIR
    path = base / f"{template_id}.yaml"
    if not path.is_file():
        raise KeyError(f"no prompt template {template_id!r} in {base}")
    return path


def load_template(template_id: str, root: str | Path | None = None) -> Template:
    """Read ``<root>/<template_id>.yaml`` (default: the packaged forenset/prompts)."""
    path = _resolve(template_id, root)
    raw = path.read_bytes()
    data = yaml.safe_load(raw.decode("utf-8"))
    for key in ("id", "version", "system", "user"):
        if key not in data:
            raise ValueError(f"template {path} lacks {key!r}")
    if data["id"] != template_id:
        raise ValueError(f"template {path} declares id {data['id']!r}, expected {template_id!r}")
    system, user = str(data["system"]), str(data["user"])
    return Template(
        id=data["id"],
        version=int(data["version"]),
        system=system,
        user=user,
        content_hash=hashlib.sha256(raw).hexdigest(),
        path=str(path),
        task=str(data.get("task", "")),
        description=str(data.get("description", "")),
        response_model=data.get("response_model"),
        variables=frozenset(_placeholders(system) | _placeholders(user)),
        max_tokens=int(data["max_tokens"]) if data.get("max_tokens") is not None else None,
    )


def list_templates(root: str | Path | None = None) -> list[str]:
    """Ids of all templates under root (taxonomy.yaml is data, not a template)."""
    base = Path(root) if root is not None else PROMPTS_DIR
    return sorted(p.stem for p in base.glob("*.yaml") if p.stem != "taxonomy")


def _format_value(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return "; ".join(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def render(
    template_id: str, root: str | Path | None = None, **variables: object
) -> tuple[str, str, str, str]:
    """Fill a template; returns ``(system, user, prompt_id, prompt_hash)``.

    Every placeholder must be given and no unknown name may be passed (typos fail loudly).
    ``$schema`` is filled with the JSON schema of the template's response model unless given.
    Non-string values are rendered as JSON (lists of strings as '; '-joined text).
    """
    tpl = load_template(template_id, root)
    values = {k: _format_value(v) for k, v in variables.items()}
    if "schema" in tpl.variables and "schema" not in values:
        from forenset.text.models import response_model_for

        model = response_model_for(tpl)
        if model is None:
            raise ValueError(f"template {template_id!r} uses $schema but names no response_model")
        values["schema"] = json.dumps(model.model_json_schema(), sort_keys=True)
    missing = sorted(tpl.variables - values.keys())
    unknown = sorted(values.keys() - tpl.variables - AUTO_VARS)
    if missing:
        raise ValueError(f"template {template_id!r} needs {missing}")
    if unknown:
        raise ValueError(f"template {template_id!r} has no placeholders {unknown}")
    system = string.Template(tpl.system).substitute(values)
    user = string.Template(tpl.user).substitute(values)
    return system, user, tpl.prompt_id, tpl.content_hash
