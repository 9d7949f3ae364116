"""Request bodies (kio field names) that several tests send with a raw KafkaConnection."""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from typing import Any


def consumer_fetch_body(
    topic: str | None = None,
    *,
    topic_id: Any = None,
    partition: int = 0,
    offset: int = 0,
    max_wait: int = 0,
    min_bytes: int = 0,
    leader_epoch: int = -1,
) -> dict[str, Any]:
    """A consumer's one-partition Fetch (by name up to v12, by id from v13); by default it
    answers at once and names no leader epoch."""
    return {
        "replica_id": -1,
        "max_wait": max_wait,
        "min_bytes": min_bytes,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": leader_epoch,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def sample_entity(cls: type, present: bool) -> object:
    """A well-formed instance of a kio entity: every array with two elements, every nullable
    struct present (or absent), strings and bytes non-empty."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        tp, kt = hints[f.name], f.metadata.get("kafka_type")
        nullable = typing.get_origin(tp) in (typing.Union, types.UnionType)
        inner = next((a for a in typing.get_args(tp) if a is not type(None)), tp) if nullable else tp

        def scalar(kind: str | None) -> object:
            return {
                "string": "ab",
                "bytes": b"xy",
                "records": b"",
                "uuid": uuid.uuid4(),
                "bool": True,
                "timedelta_i32": datetime.timedelta(milliseconds=5),
                "timedelta_i64": datetime.timedelta(milliseconds=5),
                "datetime_i64": datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC),
                "float64": 1.5,
            }.get(kind or "", 1)

        if typing.get_origin(inner) is tuple:
            elem = typing.get_args(inner)[0]
            if dataclasses.is_dataclass(elem):
                kwargs[f.name] = (sample_entity(elem, present), sample_entity(elem, not present))
            else:
                kwargs[f.name] = (scalar(kt), scalar(kt))
        elif isinstance(inner, type) and dataclasses.is_dataclass(inner):
            kwargs[f.name] = sample_entity(inner, present) if (present or not nullable) else None
        else:
            kwargs[f.name] = scalar(kt)
    return cls(**kwargs)
