"""Typed params: one section of params.yaml as a frozen, validated dataclass.

Every stage calls :func:`load_section` first, so a bad value fails at once naming the key
(``train.model.hidden_size: expected int, got 'big'``). Unknown keys are errors, missing ones take
the default; types are checked recursively (an int passes as a float, a bool never as a number),
then the dataclass' ``check()``; :func:`load_section` adds ``check_params(key, params)`` (across
sections) and ``check_runtime(key)`` (this machine).

The file must be a YAML mapping without duplicated keys, whose aliases (``*name``) expand to at
most :data:`MAX_VALUES` values; ``1e-3``-style numbers are numbers, as in YAML 1.2 and DVC (PyYAML
would make them strings). Error messages cut values short (:func:`shown`)."""
from __future__ import annotations

import argparse
import dataclasses
import math
import re
import reprlib
import types
import typing
from pathlib import Path
from typing import Any, Callable, Literal, TypeVar, get_args, get_origin

import yaml

from rnnsearch.errors import ConfigError

T = TypeVar("T")

DEFAULT_PARAMS = "params.yaml"
# The values (scalars, lists and mappings) a params file may stand for, its aliases expanded:
# params.yaml holds some 500; nine lists of nine aliases, nested nine deep, 387 million.
MAX_VALUES = 1_000_000

SHOWN_CHARS = 120       # the most of a value an error message shows
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = 2, 80, 80, 80


def shown(value: Any) -> str:
    """``repr(value)`` for an error message: at most :data:`SHOWN_CHARS` characters, six items
    of a list (four of a mapping), two levels deep, so as quick for a million items as for one."""
    text = _SHOWN.repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


def at_least(minimum: float, number: Callable[[str], Any] = int) -> Callable[[str], Any]:
    """An argparse ``type``: a ``number`` (``int`` or ``float``) >= ``minimum``; argparse names
    the option in its error (``--seconds: must be >= 0, got -3.0``), and NaN is refused."""
    kind = "an integer" if number is int else "a number"

    def parse(text: str) -> Any:
        try:
            value = number(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None
        if not value >= minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value
    return parse


def require(condition: bool, key: str, message: str) -> None:
    """Raise :class:`ConfigError` naming ``key`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(f"{key}: {message}")


class _DuplicateKey(yaml.YAMLError):
    """A mapping repeats a key; carries the key and its line (1-based)."""

    def __init__(self, key: Any, line: int, first_line: int) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key, self.line, self.first_line = key, line, first_line


class _TooManyValues(yaml.YAMLError):
    """The document's aliases expand to more than :data:`MAX_VALUES` values; carries how many."""

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} values")
        self.count = count


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many values ``node`` stands for, each alias counted as the node it repeats; ``sizes``
    holds the nodes counted so far (by id), so each is walked once however often repeated."""
    if id(node) not in sizes:
        sizes[id(node)] = 1                 # an alias inside the node it names: counted once
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        else:
            children = []
        sizes[id(node)] = 1 + sum(_expanded_size(child, sizes) for child in children)
    return sizes[id(node)]


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` refusing a repeated key (YAML 1.2, DVC; not silently the last value)
    and aliases expanding past :data:`MAX_VALUES` values (a few lines can stand for billions:
    every later walk and error message would hang)."""

    def compose_document(self) -> yaml.Node:
        node = super().compose_document()
        count = _expanded_size(node, {})
        if count > MAX_VALUES:
            raise _TooManyValues(count)
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise _DuplicateKey(key, line, seen[key])
            except TypeError:       # an unhashable key: SafeLoader's own error follows
                continue
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


# YAML 1.2's floats that YAML 1.1 lacks: an exponent without a dot or without a sign. The
# strings YAML 1.1 does read as floats (``0.5``, ``1.0e-6``) keep their resolver, tried first.
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$")
_UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT,
                                       list("-+.0123456789"))


def read_params(path: str | Path = DEFAULT_PARAMS) -> dict[str, Any]:
    """Read a params YAML file into a dict; errors name the file (and line)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: params file not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from err
    return parse_params(text, str(path))


def parse_params(text: str, where: str) -> dict[str, Any]:
    """Params YAML ``text`` as a dict, read as :func:`read_params` reads a file (YAML 1.2
    numbers, no repeated key); errors name ``where`` it came from (a file, ``rev:path``)."""
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except _DuplicateKey as err:
        raise ConfigError(f"{where}:{err.line}: duplicate key '{err.key}' (first at line "
                          f"{err.first_line}); keep only one of them") from err
    except _TooManyValues as err:
        raise ConfigError(f"{where}: its aliases expand to {err.count:,} values, more than the "
                          f"{MAX_VALUES:,} a params file may hold; write the values out") from err
    except yaml.YAMLError as err:
        raise ConfigError(f"{where}: not valid YAML: {' '.join(str(err).split())}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping of sections at the top level")
    return data


def required_section(params: dict[str, Any], section: str, origin: str | Path) -> Any:
    """``params[section]``; a params file without it fails naming the file and the section."""
    if section not in params:
        raise ConfigError(f"{origin}: missing section '{section}'")
    return params[section]


def load_section(cls: type[T], section: str, path: str | Path = DEFAULT_PARAMS,
                 runtime: bool = True) -> T:
    """Load ``section`` of the params file at ``path`` into ``cls``: :func:`from_dict`, then
    its ``check_params`` and (``runtime``) ``check_runtime`` methods, if any."""
    params = read_params(path)
    obj = from_dict(cls, required_section(params, section, path), section)
    check_params(obj, section, params)
    if runtime:
        check_runtime(obj, section)
    return obj


def check_params(obj: Any, key: str, params: dict[str, Any]) -> None:
    """Run ``obj.check_params(key, params)`` (checks against other sections), if defined."""
    check = getattr(obj, "check_params", None)
    if callable(check):
        check(key, params)


def check_runtime(obj: Any, key: str) -> None:
    """Run ``obj.check_runtime(key)`` (checks that depend on this machine), if defined."""
    check = getattr(obj, "check_runtime", None)
    if callable(check):
        check(key)


def from_dict(cls: type[T], data: Any, key: str) -> T:
    """Build and validate the dataclass ``cls`` from ``data``; ``key`` prefixes error messages."""
    if not isinstance(data, dict):
        raise ConfigError(f"{key}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}: unknown key (known: {', '.join(sorted(fields))})")
    values = {}
    for name, field in fields.items():
        if name in data:
            values[name] = _coerce(hints[name], data[name], f"{key}.{name}")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{key}.{name}: required key is missing")
    obj = cls(**values)
    _check_tree(obj, key)
    return obj


def _check_tree(obj: Any, key: str) -> None:
    """Run ``check(key)`` on ``obj`` (its nested dataclasses check themselves when built)."""
    check = getattr(obj, "check", None)
    if callable(check):
        check(key)


def _coerce(hint: Any, value: Any, key: str) -> Any:
    """Check ``value`` against the type ``hint``; return it converted (lists to tuples etc.)."""
    origin = get_origin(hint)
    if origin is Literal:
        allowed = get_args(hint)
        require(value in allowed, key, f"must be one of {list(allowed)}, got {shown(value)}")
        return value
    if origin in (typing.Union, types.UnionType):
        return _coerce_union(hint, value, key)
    if origin in (list, tuple):
        return _coerce_sequence(hint, value, key)
    if dataclasses.is_dataclass(hint):
        return from_dict(hint, value, key)
    return _coerce_scalar(hint, value, key)


def _coerce_union(hint: Any, value: Any, key: str) -> Any:
    options = get_args(hint)
    if value is None:
        require(type(None) in options, key, "must not be null")
        return None
    errors = []
    for option in options:
        if option is type(None):
            continue
        try:
            return _coerce(option, value, key)
        except ConfigError as err:
            errors.append(str(err))
    if len(errors) == 1:
        raise ConfigError(errors[0])
    kinds = " or ".join(_type_name(option) for option in options if option is not type(None))
    raise ConfigError(f"{key}: expected {kinds}, got {shown(value)}")


def _type_name(hint: Any) -> str:
    """How an error names the type ``hint``: ``int``, ``'auto'``, ``a list``, ``a mapping``."""
    if get_origin(hint) is Literal:
        return " or ".join(repr(value) for value in get_args(hint))
    if get_origin(hint) in (list, tuple):
        return "a list"
    if dataclasses.is_dataclass(hint):
        return "a mapping"
    return getattr(hint, "__name__", str(hint))


def _coerce_sequence(hint: Any, value: Any, key: str) -> tuple:
    require(isinstance(value, (list, tuple)), key, f"expected a list, got {shown(value)}")
    args = [a for a in get_args(hint) if a is not Ellipsis]
    item = args[0] if args else Any
    return tuple(_coerce(item, v, f"{key}[{i}]") for i, v in enumerate(value))


def _coerce_scalar(hint: Any, value: Any, key: str) -> Any:
    if hint is Any:
        return value
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        require(ok, key, f"expected a number, got {shown(value)}")
        number = float(value) if not isinstance(value, int) or abs(value) < 2**1023 else math.inf
        require(math.isfinite(number), key, f"must be a finite number, got {shown(value)}"
                " (where the key allows null, null means none)")
        return number
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        require(ok, key, f"expected an integer, got {shown(value)}")
        return value
    if hint is bool:
        require(isinstance(value, bool), key, f"expected true or false, got {shown(value)}")
        return value
    if hint is str:
        require(isinstance(value, str), key, f"expected a string, got {shown(value)}")
        return value
    raise TypeError(f"{key}: unsupported type hint {hint!r} in the config dataclass")


def check_positive(obj: Any, key: str, *names: str) -> None:
    """Require each named numeric field of ``obj`` to be > 0."""
    for name in names:
        value = getattr(obj, name)
        require(value > 0, f"{key}.{name}", f"must be > 0, got {value}")


def check_non_negative(obj: Any, key: str, *names: str) -> None:
    """Require each named numeric field of ``obj`` to be >= 0."""
    for name in names:
        value = getattr(obj, name)
        require(value >= 0, f"{key}.{name}", f"must be >= 0, got {value}")


MAX_SEED = 2**32 - 1   # numpy's and Lightning's seed range is [0, 2**32 - 1]


def check_seed(obj: Any, key: str, *names: str) -> None:
    """Require each named seed field of ``obj`` to be in ``[0, 2**32 - 1]``: numpy refuses a
    negative seed, and Lightning replaces one outside that range by a random seed."""
    for name in names:
        value = getattr(obj, name)
        require(0 <= value <= MAX_SEED, f"{key}.{name}",
                f"a seed must be in [0, {MAX_SEED}], got {value}")
