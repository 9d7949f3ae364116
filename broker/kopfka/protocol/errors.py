"""Kafka error codes (from kio) and the exceptions that carry them up to a response.

Any layer may raise `KafkaError(ErrorCode.x, "why")`; the request handler turns it into the
error code of the partition or request it was processing, so a bad input never escapes as an
unexpected exception.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["CorruptRecordError", "ErrorCode", "InvalidRecordError", "KafkaError"]


class KafkaError(Exception):
    """An error with a Kafka wire error code."""

    code: ErrorCode = ErrorCode.unknown_server_error

    def __init__(self, code: ErrorCode | None = None, message: str = "") -> None:
        if code is not None:
            self.code = code
        super().__init__(message or self.code.name)

    @property
    def message(self) -> str:
        return str(self)


class CorruptRecordError(KafkaError):
    """A record batch failed its size, magic or CRC check (CORRUPT_MESSAGE)."""

    code = ErrorCode.corrupt_message


class InvalidRecordError(KafkaError):
    """A well-formed batch that breaks a broker rule (INVALID_RECORD)."""

    code = ErrorCode.invalid_record
