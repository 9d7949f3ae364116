"""How the operator reaches a cluster's Kafka API: which address, and with which credentials.

An unsecured cluster is reached on its client listeners as before. A secured one on the
REPLICATION listener of its bootstrap Service, with the operator's own certificate from
`<cluster>-operator-certs` (mutual TLS; its principal is a super user): the roller, the scaler
and the Topic/Quota/User reconcilers all connect the same way.
"""

from __future__ import annotations

import os
import ssl
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from kopfka.security.client import ClientSecurity

from ..kube import KubeApi
from ..manifests.services import operator_bootstrap
from ..naming import operator_secret_name
from ..spec import SpecError, parse_spec
from .certificates import CA_CERT, TLS_CERT, TLS_KEY, decode


def is_secured(body: Mapping[str, Any]) -> bool:
    """Whether the KafkaCluster's spec asks for security (an invalid spec: as its listeners say)."""
    spec = body.get("spec") or {}
    try:
        return parse_spec(spec, "unused").secured
    except SpecError:
        listeners = spec.get("listeners") or []
        return bool(spec.get("authorization")) or any(
            isinstance(lst, Mapping) and (lst.get("tls") or lst.get("authentication")) for lst in listeners
        )


def admin_bootstrap(body: Mapping[str, Any]) -> str | None:
    """Where the operator's admin connections go, once the status names the bootstrap Service."""
    status = body.get("status") or {}
    bootstrap = status.get("bootstrapServers")
    if not bootstrap:
        return None
    if not is_secured(body):
        return str(bootstrap)
    meta = body["metadata"]
    try:
        spec = parse_spec(body.get("spec") or {}, "unused")
    except SpecError:
        return None
    return operator_bootstrap(meta["name"], meta.get("namespace") or "", spec)


def client_security(data: Mapping[str, bytes]) -> ClientSecurity:
    """Mutual TLS with the operator's certificate, trusting the cluster CA and checking the
    broker's host name. The key goes to OpenSSL through a private temporary file, removed at once."""
    ctx = ssl.create_default_context(cadata=data[CA_CERT].decode())
    fd, path = tempfile.mkstemp(prefix="kopfka-operator-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data[TLS_KEY] + data[TLS_CERT])
        ctx.load_cert_chain(path)
    finally:
        os.unlink(path)
    return ClientSecurity("SSL", ctx)


class OperatorCredentials:
    """The operator's ClientSecurity per cluster, rebuilt when its Secret changes (a renewed
    certificate) and looked up at most every `ttl` seconds."""

    def __init__(self, ttl: float = 30.0) -> None:
        self.ttl = ttl
        self._cache: dict[tuple[str, str], tuple[float, str, ClientSecurity]] = {}

    async def get(self, api: KubeApi, namespace: str, cluster: str) -> ClientSecurity | None:
        key = (namespace, cluster)
        cached = self._cache.get(key)
        if cached is not None and time.monotonic() - cached[0] < self.ttl:
            return cached[2]
        secret = await api.get("Secret", namespace, operator_secret_name(cluster))
        if secret is None:
            self._cache.pop(key, None)
            return None
        version = str(secret["metadata"].get("resourceVersion"))
        if cached is not None and cached[1] == version:
            security = cached[2]
        else:
            try:
                security = client_security(decode(secret))
            except (KeyError, ValueError, ssl.SSLError):
                return None
        self._cache[key] = (time.monotonic(), version, security)
        return security

    async def for_body(self, api: KubeApi, body: Mapping[str, Any]) -> ClientSecurity | None:
        """The credentials for a KafkaCluster object (None for an unsecured one)."""
        if not is_secured(body):
            return None
        meta = body["metadata"]
        return await self.get(api, meta.get("namespace") or "", meta["name"])
