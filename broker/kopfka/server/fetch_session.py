"""Incremental fetch sessions (KIP-227).

A client that opens a session (epoch 0) afterwards sends only the partitions that changed and
receives only partitions with news (records, moved watermarks, errors). The cache holds at most
max.incremental.fetch.session.cache.slots sessions; when full, new sessions are refused (the
client gets session id 0 and keeps doing full fetches).
"""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import dataclass, field

from kopfka.protocol.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0


@dataclass
class CachedPartition:
    """Kafka's CachedPartition: a session partition's last fetch request and the watermarks last sent for it."""

    topic: str
    partition: int
    topic_id: str | None
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


@dataclass
class FetchSession:
    """An incremental fetch session (KIP-227): its id, the epoch expected next, its partitions and last use."""

    session_id: int
    epoch: int
    partitions: dict[tuple[str, int], CachedPartition] = field(default_factory=dict)
    last_used: float = field(default_factory=time.monotonic)


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000, eviction_s: float = 120.0) -> None:
        self.max_slots = max_slots
        self.eviction_s = eviction_s
        self.sessions: dict[int, FetchSession] = {}
        self._ids = itertools.count(random.randrange(1, 1 << 20))

    def _evict(self) -> None:
        now = time.monotonic()
        for sid, s in list(self.sessions.items()):
            if now - s.last_used > self.eviction_s:
                del self.sessions[sid]

    def new_session(self) -> FetchSession | None:
        self._evict()
        if len(self.sessions) >= self.max_slots:
            return None
        sid = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        s = FetchSession(sid, 1)
        self.sessions[sid] = s
        return s

    def get(self, session_id: int, epoch: int) -> FetchSession:
        s = self.sessions.get(session_id)
        if s is None:
            raise KafkaError(ErrorCode.fetch_session_id_not_found, f"fetch session {session_id} not found")
        if s.epoch != epoch:
            raise KafkaError(
                ErrorCode.invalid_fetch_session_epoch,
                f"fetch session {session_id} expected epoch {s.epoch}, got {epoch}",
            )
        s.last_used = time.monotonic()
        return s

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)
