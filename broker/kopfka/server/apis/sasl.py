"""SaslHandshake / SaslAuthenticate outside a SASL exchange.

On a SASL listener the connection's authenticator answers them before any handler runs
(kopfka.security.sasl_server). They reach these handlers only on a listener without SASL, or
after authentication on a client that cannot re-authenticate: Kafka answers ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from typing import Any

from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode
from kopfka.security.sasl_server import SASL_AUTHENTICATE, SASL_HANDSHAKE
from kopfka.server.apis.registry import api
from kopfka.server.request_context import RequestContext

EXTRA_APIS[SASL_HANDSHAKE] = (0, 1)
EXTRA_APIS[SASL_AUTHENTICATE] = (0, 2)


def illegal_handshake() -> dict[str, Any]:
    return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []}


def illegal_authenticate() -> dict[str, Any]:
    return {
        "error_code": ErrorCode.illegal_sasl_state,
        "error_message": "SaslAuthenticate request received after successful authentication",
        "auth_bytes": b"",
        "session_lifetime": 0,
    }


@api(SASL_HANDSHAKE)
async def handle_sasl_handshake(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return illegal_handshake()


@api(SASL_AUTHENTICATE)
async def handle_sasl_authenticate(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return illegal_authenticate()
