"""What a request handler can reach: the broker's subsystems and the request's metadata."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kopfka.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from kopfka.server.broker_services import BrokerServices


@dataclass
class RequestContext:
    """Kafka's RequestContext: one request's header, connection and principal, with the broker's services."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    listener_name: str
    client_host: str
    services: BrokerServices
    request_size: int = 0
    throttle_ms: int = 0  # bandwidth/mutation throttle set by the handler (quota.throttling)
    work_ns: int = 0  # time the handler's own steps took (not its waits): charged to request_percentage
    # what the client said in ApiVersions v3+ on this connection (KIP-511), for KIP-714 `match` selectors
    client_software_name: str = ""
    client_software_version: str = ""
    client_port: int = 0
    principal: KafkaPrincipal = ANONYMOUS  # who sent it (TLS certificate, SASL identity, or ANONYMOUS)
    security_protocol: str = "PLAINTEXT"
    connection: Any = None  # the client connection (share sessions end with it)

    @property
    def image(self) -> Any:
        return self.services.metadata.image
