"""API key → handler registry. Handlers return a plain dict (built into the version's kio
response) or a `RawResponse` of pre-encoded chunks (Fetch), or None (acks=0 produce)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kopfka.server.request_context import RequestContext


@dataclass
class RawResponse:
    chunks: list[Any]  # bytes | FileSlice; already framed (size prefix included)
    size: int


Handler = Callable[[RequestContext, Any], Awaitable[dict[str, Any] | RawResponse | None]]
HANDLERS: dict[int, Handler] = {}


def api(api_key: int) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[api_key] = fn
        return fn

    return register
