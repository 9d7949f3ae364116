"""Build version-specific kio response entities from plain, version-agnostic dicts.

Handlers describe a response once (a dict holding the union of fields across versions, with
plain ints for milliseconds and timestamps); this module constructs the kio dataclass for the
negotiated version, dropping fields the version doesn't have and converting ms ints into the
timedelta/datetime types kio expects. Field introspection is cached per class.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MISSING = dataclasses.MISSING


def _to_timedelta(v: Any) -> Any:
    return v if isinstance(v, datetime.timedelta) else datetime.timedelta(milliseconds=int(v))


def _to_datetime(v: Any) -> Any:
    if v is None or isinstance(v, datetime.datetime):
        return v
    v = int(v)
    if v < 0:
        return None
    return _EPOCH + datetime.timedelta(milliseconds=v)


def _to_datetime_not_null(v: Any) -> Any:
    """A non-nullable timestamp: Kafka writes -1 for "none" (e.g. a transaction's start time
    before it began), which kio can only carry as the datetime 1 ms before the epoch."""
    if isinstance(v, datetime.datetime):
        return v
    return _EPOCH + datetime.timedelta(milliseconds=int(v))


def _to_error(v: Any) -> Any:
    return v if isinstance(v, ErrorCode) else ErrorCode(int(v))


def _to_uuid(v: Any) -> Any:
    if v is None or isinstance(v, uuid.UUID):
        return v
    return uuid.UUID(bytes=v) if isinstance(v, bytes) else uuid.UUID(str(v))


_SCALAR_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "timedelta_i32": _to_timedelta,
    "timedelta_i64": _to_timedelta,
    "datetime_i64": _to_datetime,
    "error_code": _to_error,
    "uuid": _to_uuid,
}


@dataclasses.dataclass(frozen=True)
class _FieldPlan:
    """How `build` fills one field of a kio entity: its name, whether it must be given, its default and converter."""

    name: str
    required: bool
    default: Any
    convert: Callable[[Any], Any] | None


def _entity_class_of(tp: Any) -> type | None:
    """The nested entity class inside `X`, `X | None`, or `tuple[X, ...]`, if any."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            if arg is not type(None):
                return _entity_class_of(arg)
        return None
    if origin is tuple:
        return _entity_class_of(typing.get_args(tp)[0])
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return tp
    return None


def _is_optional(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)


def _is_tuple(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_is_tuple(a) for a in typing.get_args(tp) if a is not type(None))
    return origin is tuple


@cache
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    hints = typing.get_type_hints(cls)
    plans = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        nested = _entity_class_of(tp)
        is_tuple = _is_tuple(tp)
        convert: Callable[[Any], Any] | None
        if nested is not None:
            convert = _nested_converter(nested, is_tuple)
        elif is_tuple:
            convert = tuple
        else:
            convert = _SCALAR_CONVERTERS.get(f.metadata.get("kafka_type", ""))
            if convert is _to_datetime and not _is_optional(tp):
                convert = _to_datetime_not_null
        if f.default is not _MISSING:
            required, default = False, f.default
        elif f.default_factory is not _MISSING:
            required, default = False, f.default_factory()
        elif is_tuple:
            required, default = False, ()
        else:
            required, default = True, None
        plans.append(_FieldPlan(f.name, required, default, convert))
    return tuple(plans)


def _nested_converter(nested: type, is_tuple: bool) -> Callable[[Any], Any]:
    if is_tuple:
        return lambda v: None if v is None else tuple(build(nested, x) for x in v)
    return lambda v: None if v is None else build(nested, v)


def build(cls: type, data: Mapping[str, Any] | Any) -> Any:
    """Construct `cls` from `data` (a dict, or already an instance of `cls`)."""
    if not isinstance(data, Mapping):
        return data
    kwargs = {}
    for p in _plan(cls):
        if p.name in data:
            v = data[p.name]
            kwargs[p.name] = p.convert(v) if (p.convert is not None and v is not None) else v
        elif p.required:
            raise KeyError(f"{cls.__module__}.{cls.__qualname__} needs field {p.name!r}")
    return cls(**kwargs)


def field_names(cls: type) -> frozenset[str]:
    return frozenset(p.name for p in _plan(cls))
