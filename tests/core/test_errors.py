"""Every exception class forenset defines derives from one base, ``forenset.errors.ForensetError``
(issue 30), and keeps its builtin base, so old ``except ValueError`` clauses still catch it."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import forenset
from forenset.errors import ConfigError, ConfigurationError, ForensetError

PKG = Path(forenset.__file__).resolve().parent


def exception_classes() -> list[tuple[str, str]]:
    """(module, class) of every class in forenset whose name or bases say it is an exception."""
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if "testing" in path.relative_to(PKG).parts:
            continue
        module = ".".join(path.relative_to(PKG.parent).with_suffix("").parts)
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [ast.unparse(b) for b in node.bases]
            if any(b.endswith(("Error", "Exception", "Aborted", "BadImage")) for b in bases):
                found.append((module, node.name))
    return found


def test_every_exception_class_derives_from_forenset_error():
    classes = exception_classes()
    assert len(classes) >= 15  # the issue counted 15; a new one must derive too
    loose = []
    for module, name in classes:
        cls = getattr(importlib.import_module(module), name)
        if not issubclass(cls, ForensetError):
            loose.append(f"{module}.{name}")
    assert not loose, "not a ForensetError: " + ", ".join(loose)


def test_config_error_and_configuration_error_are_one_class():
    assert ConfigError is ConfigurationError
    from forenset.confbase import ConfigError as from_confbase
    from forenset.config import ConfigError as from_config

    assert from_config is from_confbase is ConfigurationError


def test_builtin_bases_are_kept():
    from forenset.images import BadImage
    from forenset.store.run_store import RunLockedError

    assert issubclass(BadImage, ValueError)
    assert issubclass(RunLockedError, RuntimeError)
    assert issubclass(ConfigurationError, RuntimeError)
