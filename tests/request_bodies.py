"""Request bodies (kio field names) that several tests send with a raw KafkaConnection."""

from __future__ import annotations

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
