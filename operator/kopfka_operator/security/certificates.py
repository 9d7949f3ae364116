"""The certificate authorities of a secured cluster and the certificates issued from them, kept
in Secrets the operator owns (garbage-collected with the KafkaCluster).

- `<cluster>-cluster-ca` / `<cluster>-clients-ca`: the CAs' certificate and key (ca.crt, ca.key);
  `<cluster>-cluster-ca-cert` / `<cluster>-clients-ca-cert`: the certificate alone, for clients.
  Generated once, or brought by the user (`generateCertificateAuthority: false`).
- `<cluster>-<role>-certs`: one PEM keystore per pod (`<pod>.pem`, key and certificate) with
  SANs for its DNS names (pod, headless Service, and for brokers the bootstrap Service and the
  external listeners' addresses: manifests/external.py), plus the
  truststores `ca.crt` and `clients-ca.crt`; mounted read-only into every pod of the pool.
- `<cluster>-operator-certs`: the operator's own client certificate (a super user).

Renewal: a certificate within `renewalDays` of its expiry, signed by another CA, or with other
names than the pod needs is issued again. A pool's certificates are issued again together and
its Secret's generation goes up; the version of the Secret (generation, and a trust counter that
goes up when its truststores gain a CA) is on the pod template (`kopfka.io/certs-version`), so
the roller restarts the pods one at a time with their new certificates. A pod added by scaling
gets its certificate without a new generation: nothing rolls. A generated CA is renewed in two
rolls (trust both, then sign with the new one: `ensure_ca`, `finish_renewals`).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from ..kube import ApiError, KubeApi
from ..manifests.common import Cluster, Manifest, metadata
from ..manifests.external import external_hosts
from ..manifests.statefulset import CERTS_VERSION_ANNOTATION as CERTS_VERSION
from ..naming import (
    LABEL_CLUSTER,
    LABEL_ROLE,
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
# Bumped when a pool's truststores gain a CA (a renewed one): part of the certs version, so the
# pods roll to trust it; dropping an expired CA does not bump it (nothing to roll for).
TRUST_ANNOTATION = "kopfka.io/certs-trust"
# On a CA Secret while its renewed CA is being rolled out to the nodes' truststores.
RENEWAL_ANNOTATION = "kopfka.io/ca-renewal"
TRUSTING = "trusting"
PREVIOUS_CERT, PREVIOUS_KEY = "ca-previous.crt", "ca-previous.key"
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
    """A CA as the rest of the operator uses it. While a renewed CA is being trusted (`trusting`),
    the previous one still signs, and both are trusted."""

    signing: pki.KeyPair
    trusted: list[x509.Certificate]
    trusting: bool = False
    warning: str | None = None  # a CA the operator does not renew is due

    def bundle_pem(self) -> bytes:
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in self.trusted)


def authority_of(secret: Mapping[str, Any], name: str) -> Authority:
    """The CA Secret read: current and (after a renewal) previous CA; CertificateError if unusable."""
    data = decode(secret)
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    try:
        current = pki.load(data[CA_CERT], data[CA_KEY])
        previous = pki.load(data[PREVIOUS_CERT], data[PREVIOUS_KEY]) if PREVIOUS_KEY in data else None
        retired = x509.load_pem_x509_certificate(data[PREVIOUS_CERT]) if PREVIOUS_CERT in data else None
    except (KeyError, ValueError) as exc:
        raise CertificateError("CaInvalid", f"Secret {name} holds no usable ca.crt and ca.key: {exc}") from None
    trusting = annotations.get(RENEWAL_ANNOTATION) == TRUSTING and previous is not None
    trusted = [current.cert] + ([retired] if retired is not None else [])
    return Authority(previous if trusting and previous else current, trusted, trusting)


async def ensure_ca(
    api: KubeApi, cluster: Cluster, which: str, spec: CertificateAuthority, now: datetime.datetime
) -> Authority:
    """The CA of `which` (cluster or clients): created when missing (unless the user brings it);
    renewed in its renewal window (or on kopfka.io/force-renew=true on its Secret): the new CA
    is trusted next to the old one, which keeps signing until every node trusts both
    (`finish_renewals`); the old one is dropped once it has expired."""
    name = ca_secret_name(cluster.name, which)
    existing: Mapping[str, Any] | None = await api.get("Secret", cluster.namespace, name)
    if existing is None:
        if not spec.generate:
            raise CertificateError(
                "CaMissing",
                f"Secret {name} (ca.crt, ca.key) does not exist; spec.{which}Ca.generateCertificateAuthority "
                "is false, so the operator waits for it",
            )
        pair = pki.new_ca(f"{cluster.name}-{which}-ca", spec.validity_days, now)
        existing = await write_secret(
            api, secret_manifest(cluster, name, {CA_CERT: pair.cert_pem(), CA_KEY: pair.key_pem()}), None
        )
        log.info("KafkaCluster %s/%s: created the %s CA", cluster.namespace, cluster.name, which)
    authority = authority_of(existing, name)
    annotations = (existing.get("metadata") or {}).get("annotations") or {}
    data = decode(existing)
    due = pki.renewal_reason(authority.trusted[0], now, spec.renewal_days)
    forced = annotations.get(FORCE_RENEW_ANNOTATION) == "true"
    if spec.generate and (due or forced) and not authority.trusting:
        old = pki.load(data[CA_CERT], data[CA_KEY])
        new = pki.new_ca(f"{cluster.name}-{which}-ca", spec.validity_days, now)
        wanted = {
            CA_CERT: new.cert_pem(),
            CA_KEY: new.key_pem(),
            PREVIOUS_CERT: old.cert_pem(),
            PREVIOUS_KEY: old.key_pem(),
        }
        marks = {RENEWAL_ANNOTATION: TRUSTING, FORCE_RENEW_ANNOTATION: None}
        existing = await write_secret(api, secret_manifest(cluster, name, wanted, marks), existing)
        authority = authority_of(existing, name)
        log.info(
            "KafkaCluster %s/%s: %s CA renewed (%s); both trusted until every node trusts the new one",
            cluster.namespace,
            cluster.name,
            which,
            due or "requested",
        )
    elif PREVIOUS_CERT in data and not authority.trusting:
        retired = authority.trusted[-1]
        if retired.not_valid_after_utc <= now:  # expired: nothing it signed is valid any more
            kept = {k: v for k, v in data.items() if k not in (PREVIOUS_CERT, PREVIOUS_KEY)}
            existing = await write_secret(api, secret_manifest(cluster, name, kept), existing)
            authority = authority_of(existing, name)
    elif not spec.generate and due:
        authority.warning = (
            f"the {which} CA (yours: generateCertificateAuthority is false) {due}; replace it, see docs/security.md"
        )
    public = ca_cert_secret_name(cluster.name, which)
    existing_public = await api.get("Secret", cluster.namespace, public)
    await write_secret(api, secret_manifest(cluster, public, {CA_CERT: authority.bundle_pem()}), existing_public)
    return authority


async def finish_renewals(
    api: KubeApi, cluster: Cluster, authorities: Mapping[str, Authority], versions: Mapping[str, str]
) -> list[str]:
    """A CA being trusted is done with that once every pod of every pool runs the certificates
    version that trusts it: the new CA signs from now on (node certificates issued again: a
    second roll; User certificates at their next reconcile). Returns the CAs switched."""
    pending = [which for which, authority in authorities.items() if authority.trusting]
    if not pending:
        return []
    for pool in cluster.spec.pools:
        selector = f"{LABEL_CLUSTER}={cluster.name},{LABEL_ROLE}={pool.role}"
        pods = await api.list("Pod", cluster.namespace, selector)
        sts = await api.get("StatefulSet", cluster.namespace, pool_name(cluster.name, pool.role))
        want = int(((sts or {}).get("spec") or {}).get("replicas") or 0)
        on_version = [
            p for p in pods if (p["metadata"].get("annotations") or {}).get(CERTS_VERSION) == versions[pool.role]
        ]
        if len(pods) != want or len(on_version) != len(pods):
            return []
    for which in pending:
        name = ca_secret_name(cluster.name, which)
        existing = await api.get("Secret", cluster.namespace, name)
        data = {k: v for k, v in decode(existing).items() if k != PREVIOUS_KEY}
        await write_secret(api, secret_manifest(cluster, name, data, {RENEWAL_ANNOTATION: None}), existing)
        log.info(
            "KafkaCluster %s/%s: every node trusts the new %s CA: it signs now", cluster.namespace, cluster.name, which
        )
    return pending


def node_hosts(cluster: Cluster, pool: Pool, ordinal: int) -> list[str]:
    """The DNS names a node is reached by (advertised listeners, quorum bootstrap, operator)."""
    ns, headless = cluster.namespace, pool_name(cluster.name, pool.role)
    pod = f"{headless}-{ordinal}"
    hosts = [f"{pod}.{headless}.{ns}.svc", f"{pod}.{headless}.{ns}.svc.{CLUSTER_DOMAIN}"]
    hosts += [f"{headless}.{ns}.svc", f"{headless}.{ns}.svc.{CLUSTER_DOMAIN}"]
    if pool.is_broker:
        bootstrap = bootstrap_service_name(cluster.name)
        hosts += [bootstrap, f"{bootstrap}.{ns}", f"{bootstrap}.{ns}.svc", f"{bootstrap}.{ns}.svc.{CLUSTER_DOMAIN}"]
        hosts += [h for h in external_hosts(cluster, ordinal) if h not in hosts]
    return hosts


@dataclass
class PoolCertificates:
    version: str
    issued: list[str] = field(default_factory=list)  # pods given a certificate now
    renewed: str | None = None  # why the pool's certificates were issued again


def certs_version(generation: int, trust: int) -> str:
    """What the pods must be restarted for: certificates issued again, or a CA to trust."""
    return hashlib.sha256(f"{generation}/{trust}".encode()).hexdigest()[:16]


def _fingerprints(pem: bytes) -> set[str]:
    try:
        return {pki.fingerprint(c) for c in x509.load_pem_x509_certificates(pem)} if pem else set()
    except ValueError:
        return set()


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
    ca: Authority,
    clients_ca: Authority,
    now: datetime.datetime,
) -> PoolCertificates:
    name = certs_secret_name(cluster.name, pool.role)
    existing = await api.get("Secret", cluster.namespace, name)
    data = decode(existing)
    annotations = ((existing or {}).get("metadata") or {}).get("annotations") or {}
    generation = int(annotations.get(GENERATION_ANNOTATION) or 0)
    trust = int(annotations.get(TRUST_ANNOTATION) or 0)
    missing, renew = plan_renewal(data, cluster, pool, count, ca.signing, now)
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
        pair = pki.issue(ca.signing, subject, days, now, node_hosts(cluster, pool, ordinal))
        wanted[f"{prefix}-{ordinal}.pem"] = pair.keystore_pem()
    wanted[CA_CERT] = ca.bundle_pem()
    wanted[CLIENTS_CA_CERT] = clients_ca.bundle_pem()
    if existing is not None and any(
        _fingerprints(wanted[key]) - _fingerprints(data.get(key, b"")) for key in (CA_CERT, CLIENTS_CA_CERT)
    ):
        trust += 1  # a CA to trust that the running pods do not: they must restart
    marks: dict[str, str | None] = {GENERATION_ANNOTATION: str(generation), TRUST_ANNOTATION: str(trust)}
    if FORCE_RENEW_ANNOTATION in annotations:
        marks[FORCE_RENEW_ANNOTATION] = None
    body = secret_manifest(cluster, name, wanted, marks)
    await write_secret(api, body, existing)
    return PoolCertificates(certs_version(generation, trust), [f"{prefix}-{i}" for i in todo], renew)


async def ensure_operator_cert(api: KubeApi, cluster: Cluster, ca: Authority, now: datetime.datetime) -> bool:
    """The operator's client certificate; issued again in its renewal window or by a renewed CA
    (no roll: the operator's next connection uses it). True when the Secret changed."""
    name = operator_secret_name(cluster.name)
    existing = await api.get("Secret", cluster.namespace, name)
    data = decode(existing)
    subject = pki.name(operator_common_name(cluster.name))
    try:
        current: pki.KeyPair | None = pki.load(data[TLS_CERT], data[TLS_KEY])
    except (KeyError, ValueError):
        current = None
    renewal = cluster.spec.cluster_ca.renewal_days
    if current is None or pki.renewal_reason(current.cert, now, renewal, ca.signing.cert, subject, ()) is not None:
        current = pki.issue(ca.signing, subject, cluster.spec.cluster_ca.validity_days, now)
    wanted = {TLS_CERT: current.cert_pem(), TLS_KEY: current.key_pem(), CA_CERT: ca.bundle_pem()}
    written = await write_secret(api, secret_manifest(cluster, name, wanted), existing)
    return written is not existing


@dataclass
class ClusterCertificates:
    versions: dict[str, str]  # role -> certs version (the pod template annotation)
    warnings: list[tuple[str, str]]
    renewed: dict[str, str]  # role -> why its certificates were issued again
    switched: list[str] = field(default_factory=list)  # CAs whose renewal moved on to signing


async def ensure_certificates(
    api: KubeApi, cluster: Cluster, counts: Mapping[str, int], now: datetime.datetime | None = None
) -> ClusterCertificates:
    """Every CA and certificate a secured cluster needs, before the pods that mount them.
    `counts`: role -> how many pods need a certificate (the larger of desired and running).

    A CA renewal takes two rolls: the first makes every node trust the new CA next to the old
    one (which still signs), the second gives them certificates from the new CA; restarted and
    not-yet-restarted nodes trust each other throughout."""
    result = ClusterCertificates({}, [], {})
    if not cluster.spec.secured:
        return result
    now = now or now_utc()
    for _ in range(2):  # again at once when a CA renewal moved on to signing
        authorities = {
            "cluster": await ensure_ca(api, cluster, "cluster", cluster.spec.cluster_ca, now),
            "clients": await ensure_ca(api, cluster, "clients", cluster.spec.clients_ca, now),
        }
        result.warnings = [("CaRenewalDue", a.warning) for a in authorities.values() if a.warning]
        for pool in cluster.spec.pools:
            count = counts.get(pool.role, pool.replicas)
            certs = await ensure_pool_certs(
                api, cluster, pool, count, authorities["cluster"], authorities["clients"], now
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
        await ensure_operator_cert(api, cluster, authorities["cluster"], now)
        switched = await finish_renewals(api, cluster, authorities, result.versions)
        result.switched += switched
        if not switched:
            break
    return result


__all__ = ["ApiError", "CertificateError", "ClusterCertificates", "ensure_certificates"]
