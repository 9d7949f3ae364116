"""kopf handlers for User resources, built on the Topic/Quota machinery (resource_handlers):
the same cluster label and endpoints index, the per-cluster batcher and pooled admin
connection, the same conditions, retries with backoff and periodic resync that puts drift back.

What is kept where:
- the User's Secret (same name, owned by the User, so it goes with it): for SCRAM `password`
  (generated once, kept; edit it to change the password) and `sasl.jaas.config`; for tls
  `user.crt` and `user.key` (issued from the clients CA, again in its renewal window); and in
  both `ca.crt`, the cluster CA that signs the brokers' certificates: all a client needs;
- in Kafka: the SCRAM credential and the ACLs (security/users.py);
- in the status: what was applied (principal, authentication, the Secret's version the
  credential came from, the ACLs the resource owns).
"""

from __future__ import annotations

import base64
import datetime
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import kopf

from .. import API_VERSION, GROUP, VERSION
from ..kafka_pool import ClusterUnavailable
from ..kube import ApiError, KubeApi
from ..naming import LABEL_CLUSTER, MANAGED_BY, ca_cert_secret_name, ca_secret_name
from ..resource_handlers import (
    Clusters,
    ResourceConfig,
    _backoff,
    _changed,
    _cluster_of,
    _conditions,
    _in_sync,
    _post,
    _write_status,
)
from ..spec import SpecError, parse_spec
from . import pki
from .certificates import CA_CERT, CertificateError, authority_of, decode, write_secret
from .users import (
    SCRAM_MECHANISMS,
    UserSpecError,
    UserWork,
    acl_from_status,
    acl_to_status,
    desired_acls,
    mechanism_of,
    principal_of,
)

PASSWORD, JAAS = "password", "sasl.jaas.config"
USER_CERT, USER_KEY = "user.crt", "user.key"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"

log = logging.getLogger(__name__)


class NotYet(Exception):
    """Something the User needs is not there yet (reason, message): retried with backoff."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def jaas_config(username: str, password: str) -> str:
    return f'{SCRAM_LOGIN} required username="{username}" password="{password}";'


def _owner(body: Mapping[str, Any]) -> dict[str, Any]:
    meta = body["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": "User",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _owned_by(secret: Mapping[str, Any], body: Mapping[str, Any]) -> bool:
    uid = body["metadata"].get("uid")
    return any(o.get("uid") == uid for o in (secret.get("metadata") or {}).get("ownerReferences") or [])


async def _secret_data(kube: KubeApi, namespace: str, name: str) -> Mapping[str, Any]:
    secret = await kube.get("Secret", namespace, name)
    if secret is None or CA_CERT not in (secret.get("data") or {}):
        raise NotYet("WaitingForCluster", f"Secret {namespace}/{name} does not exist yet (the cluster is not secured?)")
    return secret


async def user_secret(
    kube: KubeApi, body: Mapping[str, Any], cluster: str, auth: str | None, now: datetime.datetime
) -> tuple[str | None, str, str | None]:
    """Make the User's Secret hold what `auth` needs; (password, Secret version, certificate
    expiry). Without authentication a Secret this User owns is deleted."""
    meta = body["metadata"]
    namespace, username = meta["namespace"], meta["name"]
    existing = await kube.get("Secret", namespace, username)
    if existing is not None and not _owned_by(existing, body):
        raise NotYet("SecretConflict", f"Secret {namespace}/{username} exists and is not this User's: rename one")
    if auth is None:
        if existing is not None:
            await kube.delete("Secret", namespace, username)
        return None, "", None
    cluster_ca = decode(await _secret_data(kube, namespace, ca_cert_secret_name(cluster, "cluster")))[CA_CERT]
    data = decode(existing)
    password: str | None = None
    expires: str | None = None
    if auth in SCRAM_MECHANISMS:
        password = data.get(PASSWORD, b"").decode() or secrets.token_urlsafe(24)
        wanted = {PASSWORD: password.encode(), JAAS: jaas_config(username, password).encode(), CA_CERT: cluster_ca}
    else:
        name = ca_secret_name(cluster, "clients")
        try:  # the CA that signs now (during its renewal: the previous one, until brokers trust both)
            clients_ca = authority_of(await _secret_data(kube, namespace, name), name).signing
        except CertificateError as exc:
            raise NotYet(exc.reason, exc.message) from None
        ca_spec = await _clients_ca_spec(kube, namespace, cluster)
        subject = pki.name(username, None)  # CN=<user>: the principal User:<user>
        try:
            pair: pki.KeyPair | None = pki.load(data[USER_CERT], data[USER_KEY])
        except (KeyError, ValueError):
            pair = None
        if pair is None or pki.renewal_reason(pair.cert, now, ca_spec[1], clients_ca.cert, subject, ()):
            pair = pki.issue(clients_ca, subject, ca_spec[0], now)
        wanted = {USER_CERT: pair.cert_pem(), USER_KEY: pair.key_pem(), CA_CERT: cluster_ca}
        expires = pair.cert.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": username,
            "namespace": namespace,
            "labels": {LABEL_CLUSTER: cluster, "app.kubernetes.io/managed-by": MANAGED_BY},
            "ownerReferences": [_owner(body)],
        },
        "type": "Opaque",
        "data": {k: base64.b64encode(v).decode() for k, v in sorted(wanted.items())},
    }
    written = await write_secret(kube, secret, existing)
    return password, str(written["metadata"].get("resourceVersion") or ""), expires


async def _clients_ca_spec(kube: KubeApi, namespace: str, cluster: str) -> tuple[int, int]:
    """(validity days, renewal days) of the cluster's clients CA."""
    obj = await kube.get("KafkaCluster", namespace, cluster)
    try:
        spec = parse_spec((obj or {}).get("spec") or {}, "unused")
    except SpecError:
        return 365, 30
    return spec.clients_ca.validity_days, spec.clients_ca.renewal_days


def _owned_acls(body: Mapping[str, Any], principal: str) -> frozenset[Any]:
    found = (acl_from_status(raw, principal) for raw in (body.get("status") or {}).get("acls") or [])
    return frozenset(a for a in found if a is not None)


def register_users(
    registry: kopf.OperatorRegistry,
    cfg: ResourceConfig,
    clusters: Clusters,
    on_change_and_resync: Callable[[str, str | None, Callable[..., Awaitable[None]]], None],
    waiting_for_cluster: Callable[..., Any],
) -> None:
    assert cfg.kube is not None
    kube = cfg.kube

    async def apply_user(body: kopf.Body, patch: kopf.Patch, endpoints: kopf.Index[Any, Any], _: Any) -> None:
        key, endpoint = waiting_for_cluster(body, patch, endpoints)
        if key is None or endpoint is None:
            return
        meta, spec, status = body.metadata, body.get("spec") or {}, body.get("status") or {}
        username = meta.name or ""
        principal = principal_of(username)
        try:
            mechanism = mechanism_of(spec)
            acls = desired_acls(spec, principal)
        except UserSpecError as exc:
            _write_status(body, patch, {"conditions": _conditions(body, False, "InvalidSpec", str(exc))})
            return
        auth = (spec.get("authentication") or {}).get("type")
        try:
            password, secret_version, expires = await user_secret(
                kube(), body, key[1], auth, datetime.datetime.now(datetime.UTC)
            )
        except NotYet as exc:
            conds = _conditions(body, False, exc.reason, str(exc), True, "WaitingForCluster")
            _write_status(body, patch, {"conditions": conds})
            return
        except (ApiError, ValueError) as exc:
            conds = _conditions(body, False, "SecretNotWritten", str(exc), True, "Retrying")
            _write_status(body, patch, {"conditions": conds})
            return
        applied = status.get("authentication")
        remove = tuple(m for t, m in SCRAM_MECHANISMS.items() if t == applied and m != mechanism)
        work = UserWork(
            resource=(meta.namespace or "", username),
            username=username,
            mechanism=mechanism,
            password=password,
            set_password=not _in_sync(body) or status.get("secretVersion") != secret_version,
            acls=acls,
            owned=_owned_acls(body, principal),
            remove_mechanisms=remove,
            in_sync=_in_sync(body),
        )
        try:
            outcome = await (await clusters.get(key, endpoint)).users.submit(work)
        except ClusterUnavailable as exc:
            conds = _conditions(body, False, exc.reason, str(exc), True, "Retrying")
            _write_status(body, patch, {"conditions": conds})
            return
        retrying = outcome.retry_after is not None
        updates: dict[str, Any] = {
            "observedGeneration": meta.get("generation"),
            "principal": principal,
            "secret": username if auth else None,
            "authentication": auth if outcome.ready else applied,
            "secretVersion": secret_version if outcome.ready else status.get("secretVersion"),
            "acls": [acl_to_status(a) for a in outcome.owned],
            "certificateNotAfter": expires,
            "conditions": _conditions(
                body,
                outcome.ready,
                outcome.reason,
                outcome.message,
                retrying,
                "Retrying" if retrying else None,
            ),
        }
        events = list(outcome.events)
        if outcome.drift:
            events.insert(0, ("Warning", "Drift", "put back to the spec: " + "; ".join(outcome.drift)))
        refused_again = outcome.refused and not _changed(body, updates)
        _write_status(body, patch, updates)
        if not refused_again:
            _post(body, events)

    on_change_and_resync("users", None, apply_user)

    @kopf.on.delete(GROUP, VERSION, "users", registry=registry)
    async def user_deleted(
        body: kopf.Body, retry: int, logger: logging.Logger | logging.LoggerAdapter[Any], **kw: Any
    ) -> None:
        """Its SCRAM credential and its ACLs go from Kafka (the Secret goes with its owner)."""
        key, endpoint, why, message = _cluster_of(body, kw["kopfka_cluster_endpoints"])
        if key is None or why in ("ClusterNotFound", "ClusterDeleting"):
            return
        username = body.metadata.name or ""
        principal = principal_of(username)
        status = body.get("status") or {}
        try:
            wanted = desired_acls(body.get("spec") or {}, principal)
        except UserSpecError:
            wanted = frozenset()
        owned = _owned_acls(body, principal)
        mechanism = SCRAM_MECHANISMS.get(status.get("authentication") or "")
        if not (mechanism or owned or wanted):
            return
        if endpoint is None:
            raise kopf.TemporaryError(message, delay=_backoff(cfg, retry, 5.0))
        work = UserWork(
            (body.metadata.namespace or "", username), username, mechanism, acls=wanted, owned=owned, delete=True
        )
        try:
            outcome = await (await clusters.get(key, endpoint)).users.submit(work)
        except ClusterUnavailable as exc:
            raise kopf.TemporaryError(str(exc), delay=_backoff(cfg, retry)) from None
        if outcome.refused:  # e.g. no authorizer: nothing to remove that Kafka would keep
            logger.warning("%s", outcome.message)
            return
        if not outcome.ready:
            raise kopf.TemporaryError(outcome.message, delay=_backoff(cfg, retry, outcome.retry_after))
        logger.info("removed %s's credential and %d ACLs", principal, len(owned | wanted))
