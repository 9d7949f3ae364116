"""Share sessions (KIP-932, Kafka's ShareSessionCache): the partitions a member fetches from one
broker, so later ShareFetch requests need name only what changed.

A session is keyed by (group, member). ShareFetch with epoch 0 opens it (replacing an old one),
with -1 closes it after the request (the member's acquired records are released), otherwise
its epoch must match the session's and then advances (wrapping after INT_MAX to 1).
ShareAcknowledge cannot open a session (epoch 0 is INVALID_SHARE_SESSION_EPOCH). At most
`group.share.max.share.sessions` sessions live on a broker (SHARE_SESSION_LIMIT_REACHED). A
session belongs to the connection that opened it: when that connection closes, the session
ends and its member's records are released.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kopfka.protocol.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT_MAX = 2**31 - 1

SessionPartition = tuple[str, int]  # (topic id, partition)


def next_epoch(epoch: int) -> int:
    return 1 if epoch in (INT_MAX, FINAL_EPOCH) else epoch + 1


@dataclass
class ShareSession:
    """A member's share session (KIP-932): its connection, the epoch expected next and its partitions."""

    group_id: str
    member_id: str
    connection: object
    epoch: int = 1
    partitions: dict[SessionPartition, str] = field(default_factory=dict)  # -> topic name


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def open(
        self, group_id: str, member_id: str, connection: object, partitions: dict[SessionPartition, str]
    ) -> ShareSession:
        """A new session (epoch 0 in the request, 1 next), replacing the member's old one."""
        key = (group_id, member_id)
        self.sessions.pop(key, None)
        if len(self.sessions) >= self.max_sessions:
            raise KafkaError(
                ErrorCode.share_session_limit_reached, "The limit of share sessions on this broker has been reached."
            )
        session = ShareSession(group_id, member_id, connection, next_epoch(INITIAL_EPOCH), dict(partitions))
        self.sessions[key] = session
        return session

    def existing(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a request with `epoch` (> 0 or -1) continues; a match advances the epoch."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise KafkaError(ErrorCode.share_session_not_found, "The share session was not found.")
        if epoch == FINAL_EPOCH:
            return session
        if session.epoch != epoch:
            raise KafkaError(
                ErrorCode.invalid_share_session_epoch,
                f"The share session epoch is invalid: expected {session.epoch}, got {epoch}.",
            )
        session.epoch = next_epoch(session.epoch)
        return session

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def of_connection(self, connection: object) -> list[ShareSession]:
        return [s for s in self.sessions.values() if s.connection is connection]
