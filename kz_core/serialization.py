"""JSON conversion for the attrs data model (``kz_core/model.py``).

``to_json_dict`` turns an attrs instance into plain JSON values (enums by value, tuples as
lists); ``from_json_dict`` rebuilds it from its class's type hints, so a result written by
one process reads back equal in another. It knows the shapes the data model uses (attrs
classes, enums, ``X | None``, ``tuple[X, ...]``, ``dict[str, X]``, str/int/float/bool) and
refuses anything else with a ``TypeError`` naming the field. No I/O here.
"""

from __future__ import annotations

import enum
import functools
import json
import types
import typing
from typing import Any, TypeVar

import attrs

T = TypeVar("T")


def to_json_dict(obj: Any) -> Any:
    """Convert an attrs instance (or a value inside one) to JSON-ready Python values."""
    if attrs.has(type(obj)):
        return {f.name: to_json_dict(getattr(obj, f.name)) for f in attrs.fields(type(obj))}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [to_json_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_json_dict(v) for k, v in obj.items()}
    return obj


def dumps(obj: Any) -> str:
    """One line of JSON for an attrs instance (NaN and infinities as JSON5 literals)."""
    return json.dumps(to_json_dict(obj), sort_keys=False, ensure_ascii=False)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_json_dict(cls: type[T], data: Any) -> T:
    """Rebuild an instance of attrs class ``cls`` from :func:`to_json_dict`'s output.

    Unknown keys are ignored (a newer writer may add fields); missing keys take the
    field's default.
    """
    return _structure(cls, data, cls.__name__)


def loads(cls: type[T], line: str) -> T:
    return from_json_dict(cls, json.loads(line))


def _structure(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1:
            return _structure(non_none[0], value, where)
        raise TypeError(f"{where}: unions of several types are not supported ({tp})")
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_structure(args[0], v, f"{where}[]") for v in value)
        return tuple(_structure(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin is dict:
        key_type, value_type = typing.get_args(tp)
        return {
            _structure(key_type, k, f"{where}.key"): _structure(value_type, v, f"{where}[{k!r}]")
            for k, v in value.items()
        }
    if isinstance(tp, type) and attrs.has(tp):
        if not isinstance(value, dict):
            raise TypeError(f"{where}: expected an object for {tp.__name__}, got {type(value).__name__}")
        hints = _hints(tp)
        kwargs = {}
        for field in attrs.fields(tp):
            if field.name in value:
                kwargs[field.name] = _structure(hints[field.name], value[field.name], f"{where}.{field.name}")
        return tp(**kwargs)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp in (str, int, bool):
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            raise TypeError(f"{where}: expected {tp.__name__}, got {value!r}")
        return value
    if tp is Any:
        return value
    raise TypeError(f"{where}: cannot rebuild a value of type {tp}")
