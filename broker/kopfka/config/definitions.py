"""A small ConfigDef: typed keys with defaults, validators and documentation.

Kafka validates every key of server.properties and of topic configs the same way (type,
range, enum); this module is that machinery, shared by broker and topic configs.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """An invalid value for a named key; the message always names the key."""

    def __init__(self, key: str, value: object, reason: str) -> None:
        self.key = key
        self.value = value
        self.reason = reason
        super().__init__(f"Invalid value {value!r} for configuration {key}: {reason}")


def _parse_bool(v: str) -> bool:
    s = v.strip().lower()
    if s in ("true", "false"):
        return s == "true"
    raise ValueError("expected true or false")


def _parse_list(v: str) -> list[str]:
    return [p.strip() for p in v.split(",") if p.strip()]


PARSERS: dict[str, Callable[[str], Any]] = {
    "int": lambda v: int(v.strip()),
    "long": lambda v: int(v.strip()),
    "short": lambda v: int(v.strip()),
    "double": lambda v: float(v.strip()),
    "boolean": _parse_bool,
    "string": lambda v: v.strip(),
    "list": _parse_list,
    "password": lambda v: v,
    "class": lambda v: v.strip(),
}


def at_least(minimum: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= minimum else f"Value must be at least {minimum}"


def between(lo: float, hi: float) -> Callable[[Any], str | None]:
    return lambda v: None if lo <= v <= hi else f"Value must be in [{lo}, {hi}]"


def one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        values = v if isinstance(v, list) else [v]
        bad = [x for x in values if x not in choices]
        return f"String must be one of: {', '.join(choices)}" if bad else None

    return check


@dataclass(frozen=True)
class ConfigKey:
    """One config key's definition (Kafka's ConfigDef.ConfigKey): type, default, validator and doc."""

    name: str
    type: str
    default: Any
    doc: str = ""
    validator: Callable[[Any], str | None] | None = None
    sensitive: bool = False
    # informational only: which broker keys a running broker takes is Kafka's list in
    # kopfka.config.dynamic_broker_config (DescribeConfigs' read_only comes from there)
    read_only: bool = False

    def parse(self, raw: Any) -> Any:
        """Parse a raw (string or already-typed) value and validate it."""
        if raw is None:
            value = None
        elif isinstance(raw, str):
            try:
                value = PARSERS[self.type](raw)
            except (ValueError, KeyError) as exc:
                raise ConfigError(self.name, raw, f"Expected value of type {self.type}") from exc
        else:
            value = raw
        if value is not None and self.type in ("int", "short") and not -(2**31) <= value <= INT_MAX:
            raise ConfigError(self.name, raw, "Value out of range for an int")
        if value is not None and self.validator is not None:
            problem = self.validator(value)
            if problem:
                raise ConfigError(self.name, raw, problem)
        return value


@dataclass
class ConfigDef:
    """Kafka's ConfigDef: the defined keys by name, which parse and validate raw values."""

    keys: dict[str, ConfigKey] = field(default_factory=dict)

    def define(self, name: str, type: str, default: Any, doc: str = "", **kw: Any) -> ConfigDef:
        self.keys[name] = ConfigKey(name, type, default, doc, **kw)
        return self

    def __contains__(self, name: object) -> bool:
        return name in self.keys

    def parse(self, raw: Mapping[str, Any], *, only_known: bool = True) -> dict[str, Any]:
        """Parse the known keys of `raw`; unknown keys are left to the caller to report."""
        out: dict[str, Any] = {}
        for name, value in raw.items():
            key = self.keys.get(name)
            if key is not None:
                out[name] = key.parse(value)
            elif not only_known:
                out[name] = value
        return out

    def unknown(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if n not in self.keys]


def format_value(value: Any) -> str | None:
    """Render a typed value the way Kafka's DescribeConfigs shows it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return java_double(value)
    return str(value)


def java_double(x: float) -> str:
    """Java's Double.toString: plain decimals in [1e-3, 1e7), else `d.dddE[-]n` (shortest digits)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return repr(x)
    d = decimal.Decimal(repr(abs(x))).normalize()
    digits = "".join(map(str, d.as_tuple().digits))
    return f"{'-' if x < 0 else ''}{digits[0]}.{digits[1:] or '0'}E{d.adjusted()}"


# IncrementalAlterConfigs operations (AlterConfigOp.OpType)
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


class AlterOpError(ValueError):
    """An operation that cannot apply to its key (Kafka answers INVALID_CONFIG / INVALID_REQUEST)."""

    def __init__(self, message: str, *, invalid_request: bool = False) -> None:
        super().__init__(message)
        self.invalid_request = invalid_request


def apply_alter_op(current: str | None, op: int, value: str | None, key: str, defn: ConfigKey | None) -> str | None:
    """The value a key has after one IncrementalAlterConfigs operation (None: deleted). APPEND and
    SUBTRACT work on list keys and, as in Kafka, start from the default when the key is unset."""
    if op == OP_SET:
        return value
    if op == OP_DELETE:
        return None
    if op in (OP_APPEND, OP_SUBTRACT):
        if defn is None or defn.type != "list":
            raise AlterOpError(f"Config value append/subtract is not allowed for config key {key} (not a list)")
        base = current if current is not None else (format_value(defn.default) or "")
        items = [x for x in base.split(",") if x]
        change = [x.strip() for x in (value or "").split(",") if x.strip()]
        if op == OP_APPEND:
            items += [x for x in change if x not in items]
        else:
            items = [x for x in items if x not in change]
        return ",".join(items)
    raise AlterOpError(f"Unknown config operation {op}", invalid_request=True)
