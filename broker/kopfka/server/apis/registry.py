"""API key → handler registry. Handlers return a plain dict (built into the version's kio
response) or a `RawResponse` of pre-encoded chunks (Fetch), or None (acks=0 produce), or a
`DeferredResponse` (an acks=all produce waiting for the ISR after its appends)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from kopfka.server.request_context import RequestContext


@dataclass
class RawResponse:
    """A response already framed as chunks (bytes, and FileSlices to send with sendfile) and their total size."""

    chunks: list[Any]  # bytes | FileSlice; already framed (size prefix included)
    size: int


@dataclass
class DeferredResponse:
    """The rest of a handler that no longer depends on request order: the connection handles its
    next requests while this runs, and still writes the responses in request order."""

    result: Coroutine[Any, Any, dict[str, Any] | RawResponse | None]


Handler = Callable[[RequestContext, Any], Awaitable[dict[str, Any] | RawResponse | DeferredResponse | None]]
HANDLERS: dict[int, Handler] = {}


def api(api_key: int) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[api_key] = fn
        return fn

    return register
