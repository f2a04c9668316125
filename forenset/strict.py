"""Strict readings of values that come from files a user hands in (Label Studio exports,
predictions, YAML configs), shared by every importer.

Why: Python's truthiness reads ``"false"`` as true, ``int(1e30)`` does not fit an Arrow int64
column (the whole shard then fails), ``float("nan")`` passes ``float()``, and PyYAML keeps the
last of two equal keys without a word. Each helper answers None (or raises ValueError with one
sentence) instead, so the caller can write an error row or refuse the file.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from forenset.errors import ForensetError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
TRUE = {"true", "yes", "1", "on"}
FALSE = {"false", "no", "0", "off", ""}


def strict_bool(value: Any, default: bool = False) -> bool | None:
    """``value`` as a bool: a JSON bool, 0/1, or one of true/false/yes/no/on/off/1/0 (any
    case); ``default`` for None; None when it is anything else (the caller reports it)."""
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in TRUE:
            return True
        if v in FALSE:
            return False
    return None


def int64(value: Any) -> int | None:
    """``value`` as an integer that fits int64 (an integral float or digit string too), else
    None: a bool, 1.5, 1e30, NaN, a list."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    elif isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            return None
    if not isinstance(value, int):
        return None
    return value if INT64_MIN <= value <= INT64_MAX else None


def finite(value: Any) -> float | None:
    """``value`` as a finite float (a number or numeric string), else None (NaN, inf, a bool,
    text)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that repeats a key, and composing at most
    ``max_nodes`` nodes (``load_yaml`` sets it): a document far over the bound stops there."""

    max_nodes: int | None = None
    _composed = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._composed += 1
        if self.max_nodes is not None and self._composed > self.max_nodes:
            raise YAMLTooLarge(f"it holds more than {self.max_nodes:,} values")
        return super().compose_node(parent, index)


def _mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    loader.flatten_mapping(node)
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            continue  # the base constructor reports unhashable keys itself
        if key in seen:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (line {mark.line + 1}; first at line {seen[key].line + 1})",
                mark,
            )
        seen[key] = key_node.start_mark
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


# What one YAML document may expand to, counted on the composed node graph before any Python
# object is built: an alias counts as a full copy of what it names (its value is copied by
# every consumer that walks it: validation, hashing, JSON dumps), so a "billion laughs" bomb of
# a few hundred bytes is refused at load instead of costing gigabytes later.
YAML_MAX_NODES = 2_000_000
YAML_MAX_DEPTH = 100


class YAMLTooLarge(ForensetError, yaml.YAMLError):
    """A YAML document that expands beyond the node or depth bound (one sentence)."""


def _expanded_size(root: yaml.Node, max_nodes: int, max_depth: int) -> int:
    """Values ``root`` stands for once every alias is expanded; YAMLTooLarge past the bounds.

    Memoised per node, so the count costs one visit per distinct node however many times the
    aliases repeat it; a node that contains itself (``&a [*a]``) is refused."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    # iterative post-order walk: (node, depth, children pushed?)
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, expanded = stack.pop()
        key = id(node)
        if depth > max_depth:
            raise YAMLTooLarge(f"it nests deeper than {max_depth} levels")
        if not expanded:
            if key in sizes:
                continue
            if key in open_:
                raise YAMLTooLarge("an alias refers to a value that contains it")
            if isinstance(node, yaml.SequenceNode):
                children = list(node.value)
            elif isinstance(node, yaml.MappingNode):
                children = [n for pair in node.value for n in pair]
            else:
                sizes[key] = 1
                continue
            open_.add(key)
            stack.append((node, depth, True))
            stack.extend((c, depth + 1, False) for c in children if id(c) not in sizes)
            continue
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = [n for pair in node.value for n in pair]
        total = 1 + sum(sizes[id(c)] for c in children)
        if total > max_nodes:
            raise YAMLTooLarge(
                f"it expands to more than {max_nodes:,} values (YAML aliases repeat what they name)"
            )
        sizes[key] = total
        open_.discard(key)
    return sizes[id(root)]


def load_yaml(
    text: str, *, max_nodes: int = YAML_MAX_NODES, max_depth: int = YAML_MAX_DEPTH
) -> Any:
    """``yaml.safe_load`` that raises ``yaml.YAMLError`` on a repeated key, and
    ``YAMLTooLarge`` (a ``yaml.YAMLError``) for a document whose expansion, aliases counted as
    copies, exceeds ``max_nodes`` values or ``max_depth`` levels (checked before construction)."""
    loader = _UniqueKeyLoader(text)
    loader.max_nodes = max_nodes
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:  # the composer recurses per level: deeper than Python's stack
            raise YAMLTooLarge(f"it nests deeper than {max_depth} levels") from None
        if node is None:
            return None
        _expanded_size(node, max_nodes, max_depth)
        return loader.construct_document(node)
    finally:
        loader.dispose()


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(value: Any) -> Any:
    """A CSV cell that a spreadsheet will not run as a formula: text starting with ``=``,
    ``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'`` (OWASP's advice for
    CSV injection); numbers, and text that is a plain number such as ``-3``, stay."""
    if not isinstance(value, str) or not value.startswith(FORMULA_START):
        return value
    if finite(value) is not None:
        return value
    return "'" + value
