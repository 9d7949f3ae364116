"""Topic name rules (Kafka's Topic.validate) and config validation for topic creation."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from kopfka.config.definitions import ConfigError
from kopfka.config.log_config import TOPIC_CONFIG
from kopfka.protocol.errors import ErrorCode, KafkaError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def validate_topic_name(name: str) -> None:
    if not name:
        raise KafkaError(ErrorCode.invalid_topic_exception, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}",
        )
    if not _LEGAL.match(name):
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'",
        )


def unify_collision_chars(name: str) -> str:
    return name.replace(".", "_")


def check_collision(name: str, existing: Iterable[str]) -> None:
    """'.' and '_' collide in metric names, so Kafka refuses topics differing only by them."""
    unified = unify_collision_chars(name)
    for other in existing:
        if other != name and unify_collision_chars(other) == unified:
            raise KafkaError(ErrorCode.invalid_topic_exception, f"Topic '{name}' collides with existing topic: {other}")


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Validate topic config overrides; returns the normalized string values."""
    out: dict[str, str] = {}
    for key, value in configs.items():
        if key not in TOPIC_CONFIG:
            raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {key}")
        if value is None:
            raise KafkaError(ErrorCode.invalid_config, f"Null value not supported for topic configs: {key}")
        try:
            TOPIC_CONFIG.keys[key].parse(value)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.invalid_config, str(exc)) from exc
        out[key] = value
    return out
