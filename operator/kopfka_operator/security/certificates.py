"""The certificate authorities of a secured cluster and the certificates issued from them, kept
in Secrets the operator owns (garbage-collected with the KafkaCluster).

- `<cluster>-cluster-ca` / `<cluster>-clients-ca`: the CAs' certificate and key (ca.crt, ca.key);
  `<cluster>-cluster-ca-cert` / `<cluster>-clients-ca-cert`: the certificate alone, for clients.
  Generated once, or brought by the user (`generateCertificateAuthority: false`).
- `<cluster>-<role>-certs`: one PEM keystore per pod (`<pod>.pem`, key and certificate) with
  SANs for its DNS names (pod, headless Service, and for brokers the bootstrap Service), plus the
  truststores `ca.crt` and `clients-ca.crt`; mounted read-only into every pod of the pool.
- `<cluster>-operator-certs`: the operator's own client certificate (a super user).

Renewal: a certificate within `renewalDays` of its expiry, signed by another CA, or with other
names than the pod needs is issued again. A pool's certificates are issued again together and
its Secret's generation goes up; the version of the Secret (generation and CA certificates) is
on the pod template (`kopfka.io/certs-version`), so the roller restarts the pods one at a time
with their new certificates. A pod added by scaling gets its certificate without a new
generation: nothing rolls. CA renewal is not automated (a Warning says when it is due;
docs/security.md).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..kube import ApiError, KubeApi
from ..manifests.common import Cluster, Manifest, metadata
from ..naming import (
    bootstrap_service_name,
    ca_cert_secret_name,
    ca_secret_name,
    certs_secret_name,
    node_common_name,
    operator_common_name,
    operator_secret_name,
    pool_name,
)
from ..spec import CertificateAuthority, Pool
from . import pki

CA_CERT, CA_KEY = "ca.crt", "ca.key"
CLIENTS_CA_CERT = "clients-ca.crt"
TLS_CERT, TLS_KEY = "tls.crt", "tls.key"
GENERATION_ANNOTATION = "kopfka.io/certs-generation"
# On a pool's certificates Secret: issue them all again now (then removed by the operator).
FORCE_RENEW_ANNOTATION = "kopfka.io/force-renew"
CLUSTER_DOMAIN = "cluster.local"

log = logging.getLogger(__name__)


class CertificateError(Exception):
    """A CA the operator cannot use: the reason becomes the KafkaCluster's Warning."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def now_utc() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def decode(secret: Mapping[str, Any] | None) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in ((secret or {}).get("data") or {}).items()}


def secret_manifest(
    cluster: Cluster, name: str, data: Mapping[str, bytes], annotations: Mapping[str, str | None] | None = None
) -> Manifest:
    meta = metadata(cluster, name)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": "Opaque",
        "data": {k: base64.b64encode(v).decode() for k, v in sorted(data.items())},
    }


async def write_secret(api: KubeApi, body: Manifest, existing: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """Create the Secret `body`, or make the existing one's data exactly that (and its
    annotations at least those); returns the object as stored. A conflict with a concurrent
    writer raises ApiError (409): the caller's handler retries on fresh state."""
    meta = body["metadata"]
    annotations = meta.get("annotations") or {}  # a None value removes the annotation
    if existing is None:
        kept = {k: v for k, v in annotations.items() if v is not None}
        return await api.create(meta["namespace"], {**body, "metadata": {**meta, "annotations": kept}})
    old = existing.get("data") or {}
    old_annotations = (existing.get("metadata") or {}).get("annotations") or {}
    if old == body["data"] and all(old_annotations.get(k) == v for k, v in annotations.items()):
        return existing
    patch: dict[str, Any] = {
        "metadata": {"resourceVersion": existing["metadata"].get("resourceVersion")},
        "data": {**{k: None for k in old if k not in body["data"]}, **body["data"]},
    }
    if annotations:
        patch["metadata"]["annotations"] = dict(annotations)
    return await api.patch("Secret", meta["namespace"], meta["name"], patch)


@dataclass
class Authority:
    pair: pki.KeyPair
    warning: str | None = None  # the CA itself is due for renewal


async def ensure_ca(
    api: KubeApi, cluster: Cluster, which: str, spec: CertificateAuthority, now: datetime.datetime
) -> Authority:
    """The CA of `which` (cluster or clients), created when missing unless the user brings it."""
    name = ca_secret_name(cluster.name, which)
    existing = await api.get("Secret", cluster.namespace, name)
    if existing is None:
        if not spec.generate:
            raise CertificateError(
                "CaMissing",
                f"Secret {name} (ca.crt, ca.key) does not exist; spec.{which}Ca.generateCertificateAuthority "
                "is false, so the operator waits for it",
            )
        pair = pki.new_ca(f"{cluster.name}-{which}-ca", spec.validity_days, now)
        await write_secret(
            api, secret_manifest(cluster, name, {CA_CERT: pair.cert_pem(), CA_KEY: pair.key_pem()}), None
        )
        log.info("KafkaCluster %s/%s: created the %s CA", cluster.namespace, cluster.name, which)
    else:
        data = decode(existing)
        try:
            pair = pki.load(data[CA_CERT], data[CA_KEY])
        except (KeyError, ValueError) as exc:
            raise CertificateError("CaInvalid", f"Secret {name} holds no usable ca.crt and ca.key: {exc}") from None
    public = ca_cert_secret_name(cluster.name, which)
    existing_public = await api.get("Secret", cluster.namespace, public)
    await write_secret(api, secret_manifest(cluster, public, {CA_CERT: pair.cert_pem()}), existing_public)
    warning = pki.renewal_reason(pair.cert, now, spec.renewal_days)
    if warning:
        warning = (
            f"the {which} CA {warning}; CA renewal is not automated yet: see docs/security.md "
            "(certificates it issues are capped at its expiry)"
        )
    return Authority(pair, warning)


def node_hosts(cluster: Cluster, pool: Pool, ordinal: int) -> list[str]:
    """The DNS names a node is reached by (advertised listeners, quorum bootstrap, operator)."""
    ns, headless = cluster.namespace, pool_name(cluster.name, pool.role)
    pod = f"{headless}-{ordinal}"
    hosts = [f"{pod}.{headless}.{ns}.svc", f"{pod}.{headless}.{ns}.svc.{CLUSTER_DOMAIN}"]
    hosts += [f"{headless}.{ns}.svc", f"{headless}.{ns}.svc.{CLUSTER_DOMAIN}"]
    if pool.is_broker:
        bootstrap = bootstrap_service_name(cluster.name)
        hosts += [bootstrap, f"{bootstrap}.{ns}", f"{bootstrap}.{ns}.svc", f"{bootstrap}.{ns}.svc.{CLUSTER_DOMAIN}"]
    return hosts


@dataclass
class PoolCertificates:
    version: str
    issued: list[str] = field(default_factory=list)  # pods given a certificate now
    renewed: str | None = None  # why the pool's certificates were issued again


def certs_version(generation: int, data: Mapping[str, bytes]) -> str:
    digest = hashlib.sha256(str(generation).encode())
    for key in (CA_CERT, CLIENTS_CA_CERT):
        digest.update(data.get(key, b""))
    return digest.hexdigest()[:16]


def plan_renewal(
    data: Mapping[str, bytes],
    cluster: Cluster,
    pool: Pool,
    count: int,
    ca: pki.KeyPair,
    now: datetime.datetime,
) -> tuple[list[int], str | None]:
    """(ordinals without a certificate, why the existing ones must all be issued again)."""
    subject = pki.name(node_common_name(cluster.name))
    renewal_days = cluster.spec.cluster_ca.renewal_days
    missing, reasons = [], []
    for ordinal in range(count):
        pod = f"{pool_name(cluster.name, pool.role)}-{ordinal}"
        raw = data.get(f"{pod}.pem")
        if raw is None:
            missing.append(ordinal)
            continue
        try:
            cert = pki.load_keystore(raw).cert
        except ValueError as exc:
            reasons.append(f"{pod}: unreadable ({exc})")
            continue
        why = pki.renewal_reason(cert, now, renewal_days, ca.cert, subject, node_hosts(cluster, pool, ordinal))
        if why:
            reasons.append(f"{pod}: {why}")
    return missing, "; ".join(reasons) or None


async def ensure_pool_certs(
    api: KubeApi,
    cluster: Cluster,
    pool: Pool,
    count: int,
    ca: pki.KeyPair,
    clients_ca: pki.KeyPair,
    now: datetime.datetime,
) -> PoolCertificates:
    name = certs_secret_name(cluster.name, pool.role)
    existing = await api.get("Secret", cluster.namespace, name)
    data = decode(existing)
    annotations = ((existing or {}).get("metadata") or {}).get("annotations") or {}
    generation = int(annotations.get(GENERATION_ANNOTATION) or 0)
    missing, renew = plan_renewal(data, cluster, pool, count, ca, now)
    if annotations.get(FORCE_RENEW_ANNOTATION) == "true":
        renew = f"requested with the annotation {FORCE_RENEW_ANNOTATION}=true"
    prefix = pool_name(cluster.name, pool.role)
    wanted = {f"{prefix}-{i}.pem": data.get(f"{prefix}-{i}.pem", b"") for i in range(count)}
    todo = list(range(count)) if renew else missing
    if renew:
        generation += 1
    subject = pki.name(node_common_name(cluster.name))
    days = cluster.spec.cluster_ca.validity_days
    for ordinal in todo:
        pair = pki.issue(ca, subject, days, now, node_hosts(cluster, pool, ordinal))
        wanted[f"{prefix}-{ordinal}.pem"] = pair.keystore_pem()
    wanted[CA_CERT] = ca.cert_pem()
    wanted[CLIENTS_CA_CERT] = clients_ca.cert_pem()
    marks: dict[str, str | None] = {GENERATION_ANNOTATION: str(generation)}
    if FORCE_RENEW_ANNOTATION in annotations:
        marks[FORCE_RENEW_ANNOTATION] = None
    body = secret_manifest(cluster, name, wanted, marks)
    await write_secret(api, body, existing)
    return PoolCertificates(certs_version(generation, wanted), [f"{prefix}-{i}" for i in todo], renew)


async def ensure_operator_cert(api: KubeApi, cluster: Cluster, ca: pki.KeyPair, now: datetime.datetime) -> bool:
    """The operator's client certificate; issued again in its renewal window (no roll: the
    operator's next connection uses it). True when it was (re)issued."""
    name = operator_secret_name(cluster.name)
    existing = await api.get("Secret", cluster.namespace, name)
    data = decode(existing)
    subject = pki.name(operator_common_name(cluster.name))
    try:
        current: pki.KeyPair | None = pki.load(data[TLS_CERT], data[TLS_KEY])
    except (KeyError, ValueError):
        current = None
    renewal = cluster.spec.cluster_ca.renewal_days
    if current is not None and pki.renewal_reason(current.cert, now, renewal, ca.cert, subject, ()) is None:
        if data.get(CA_CERT) == ca.cert_pem():
            return False
    else:
        current = pki.issue(ca, subject, cluster.spec.cluster_ca.validity_days, now)
    wanted = {TLS_CERT: current.cert_pem(), TLS_KEY: current.key_pem(), CA_CERT: ca.cert_pem()}
    written = await write_secret(api, secret_manifest(cluster, name, wanted), existing)
    return written is not existing


@dataclass
class ClusterCertificates:
    versions: dict[str, str]  # role -> certs version (the pod template annotation)
    warnings: list[tuple[str, str]]
    renewed: dict[str, str]  # role -> why its certificates were issued again


async def ensure_certificates(
    api: KubeApi, cluster: Cluster, counts: Mapping[str, int], now: datetime.datetime | None = None
) -> ClusterCertificates:
    """Every CA and certificate a secured cluster needs, before the pods that mount them.
    `counts`: role -> how many pods need a certificate (the larger of desired and running)."""
    result = ClusterCertificates({}, [], {})
    if not cluster.spec.secured:
        return result
    now = now or now_utc()
    cluster_ca = await ensure_ca(api, cluster, "cluster", cluster.spec.cluster_ca, now)
    clients_ca = await ensure_ca(api, cluster, "clients", cluster.spec.clients_ca, now)
    for authority in (cluster_ca, clients_ca):
        if authority.warning:
            result.warnings.append(("CaRenewalDue", authority.warning))
    for pool in cluster.spec.pools:
        certs = await ensure_pool_certs(
            api, cluster, pool, counts.get(pool.role, pool.replicas), cluster_ca.pair, clients_ca.pair, now
        )
        result.versions[pool.role] = certs.version
        if certs.renewed:
            result.renewed[pool.role] = certs.renewed
            log.info(
                "KafkaCluster %s/%s: %s certificates issued again (%s)",
                cluster.namespace,
                cluster.name,
                pool.role,
                certs.renewed,
            )
    await ensure_operator_cert(api, cluster, cluster_ca.pair, now)
    return result


__all__ = ["ApiError", "CertificateError", "ClusterCertificates", "ensure_certificates"]
