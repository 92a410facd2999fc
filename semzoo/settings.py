"""Settings as data: the dataclass fields a config is made of, their ranges, docs and checks.

A settings class is a frozen, keyword-only dataclass; each field's attribute docstring is its help text, a
``ranged`` field carries the ``Range`` its value must lie in, and ``check_fields`` checks an instance (finite, in
range, the right type) when it is built. ``semzoo.config`` builds ``TrainConfig`` from such classes.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import itertools
import math
import textwrap
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

RANGE = "range"
"""Key of a field's metadata that holds its ``Range``."""
FLAG = "flag"
"""Key of a field's metadata that names its CLI flag when the field's own name would say too little."""
CLI = "cli"
"""Key of a field's metadata that is False for a field with no flag of its own (``pinned``: the CLI fills it)."""
HOLDER = "holder"
"""Key of a field's metadata that is True for a field holding sections, not a leaf (``TrainConfig.components``)."""


@dataclass(frozen=True)
class Range:
    """The finite numbers a field accepts: ``low <= value <= high``, an end excluded where ``*_open``."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    note: str = ""
    """Why, or the paper's value, appended to the error."""

    def __contains__(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{_number(self.low)}, {_number(self.high)}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {_number(self.low)}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {_number(self.high)}"
        return ""  # any finite number: ``_expected`` says "a finite number" already


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


POSITIVE = Range(low=0, low_open=True)
AT_LEAST_ONE = Range(low=1)
NON_NEGATIVE = Range(low=0)
PROBABILITY = Range(low=0, high=1)


def ranged(default: Any, allowed: Range, note: str = "", **metadata: Any) -> Any:
    """A field with a default and the ``Range`` its values must lie in (``note`` explains the range)."""
    if note:
        allowed = dataclasses.replace(allowed, note=note)
    return field(default=default, metadata={RANGE: allowed, **metadata})


# --- The config tree as data: its sections, its leaves with their docs, and the checks of every field ---


_HINTS: dict[type, dict[str, Any]] = {}


def _type_hints(cls: type) -> dict[str, Any]:
    """The resolved field types of a dataclass (its annotations are strings here), computed once per class."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]






def config_sections(cls: type) -> dict[str, type]:
    """The nested sections of a config class, name -> dataclass: ``{'agent': AgentConfig, ...}``."""
    hints = _type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if dataclasses.is_dataclass(hints[f.name])}


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Each field's attribute docstring (the string right under it in the class body), as one line.

    Read from the source with ``ast``; empty when the source is not available (a frozen install).
    """
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for node, after in itertools.pairwise(body):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


@dataclass(frozen=True)
class ConfigField:
    """One leaf of the config tree; ``key`` is how ``sweep --set`` names it (``test_interval``, ``learner.lr``)."""

    key: str
    section: str | None
    name: str
    type: Any
    default: Any
    help: str
    metadata: Mapping[str, Any]


def config_fields(cls: type) -> list[ConfigField]:
    """Every leaf of the tree: the top-level fields, then each section's, in declaration order."""
    sections = config_sections(cls)
    leaves: list[tuple[str | None, dataclasses.Field[Any], type]] = [
        (None, f, cls) for f in dataclasses.fields(cls) if f.name not in sections and not f.metadata.get(HOLDER)]
    for name, section_cls in sections.items():
        leaves += [(name, f, section_cls) for f in dataclasses.fields(section_cls)]
    out = []
    for section, f, owner in leaves:
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        out.append(ConfigField(key=f"{section}.{f.name}" if section else f.name, section=section, name=f.name,
                               type=_type_hints(owner)[f.name], default=default,
                               help=field_docs(owner).get(f.name, ""), metadata=f.metadata))
    return out


def check_fields(config: Any) -> None:
    """Check every field of a config dataclass against its type and ``Range``: one ValueError naming the field.

    Integral floats given to an int field (1e6 from JSON) become ints, ints given to a float field floats.
    """
    hints = _type_hints(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        kind = hints[f.name]
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            if not isinstance(value, kind):
                raise TypeError(f"{f.name}={value!r}: expected type {kind.__name__}")
            continue
        args = typing.get_args(kind)
        if typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in args:
            if value is None:
                continue
            kind = next(arg for arg in args if arg is not type(None))
        allowed = f.metadata.get(RANGE)
        converted = _convert(value, kind)
        if converted is None or (allowed is not None and converted not in allowed):
            raise ValueError(f"{f.name}={value!r}: expected {_expected(kind, allowed)}{_fix(f)}")
        if converted is not value:
            object.__setattr__(config, f.name, converted)  # frozen: the one write, before anyone reads it


def _convert(value: Any, kind: Any) -> Any:
    """``value`` as a ``kind`` (int, float, bool, str, dict or a Literal); None when it is not one."""
    if typing.get_origin(kind) is Literal:
        return value if value in typing.get_args(kind) else None
    if kind is bool:
        return value if isinstance(value, bool) else None
    if kind in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        if kind is float:
            return float(value) if isinstance(value, int) else value
        if isinstance(value, float):
            return int(value) if value.is_integer() else None  # is_integer is False for nan and inf
        return value
    origin = typing.get_origin(kind) or kind
    return value if not isinstance(origin, type) or isinstance(value, origin) else None


def _expected(kind: Any, allowed: Range | None) -> str:
    if typing.get_origin(kind) is Literal:
        return f"one of {', '.join(map(repr, typing.get_args(kind)))}"
    if kind is bool:
        return "true or false"
    if kind in (int, float):
        text = "an integer" if kind is int else "a finite number"
        if allowed is not None:
            text += (f" {allowed}" if str(allowed) else "") + (f" ({allowed.note})" if allowed.note else "")
        return text
    return f"type {getattr(typing.get_origin(kind) or kind, '__name__', kind)}"


def _fix(f: dataclasses.Field[Any]) -> str:
    if f.default is None:
        return "; leave it unset for the default"
    if f.default is dataclasses.MISSING:
        return ""
    return f"; the default is {f.default!r}"
