"""kopf handlers for KafkaCluster, registered into a given registry.

Registering into an explicit `kopf.OperatorRegistry` (instead of kopf's global one at import
time) lets the CLI and the tests each build an operator with its own login and settings.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import kopf
from kopfka.client.admin import AdminError
from kopfka.security.client import ClientSecurity

from . import GROUP, VERSION
from .autoscale.driver import Autoscaler
from .kube import ApiError, KubeApi
from .log_dir_health import changes, log_dirs_status, read_offline_dirs
from .naming import LABEL_CLUSTER, MANAGED_BY, pool_name
from .rebalance.mover import MoverFactory
from .reconcile import delete_claims, reconcile, refresh_status
from .resource_handlers import ResourceConfig, register_topics
from .roll.kafka_view import AdminKafkaView, KafkaView
from .roll.roller import DEFAULT_BLOCKED_TIMEOUT, RollContext, roll_step
from .scale.scaler import DataMover, ScaleContext, scale_step
from .security.credentials import OperatorCredentials, admin_bootstrap
from .spec import SpecError, parse_spec

PLURAL = "kafkaclusters"
CHILD_LABELS: dict[str, Any] = {
    LABEL_CLUSTER: kopf.PRESENT,
    "app.kubernetes.io/managed-by": MANAGED_BY,
}
LoginFn = Callable[..., Awaitable[kopf.ConnectionInfo | None]]


def default_view(body: Mapping[str, Any], security: ClientSecurity | None = None) -> KafkaView | None:
    """The cluster over its bootstrap Service (in-cluster DNS), once the status names it; a
    secured cluster on its REPLICATION listener with the operator's certificate."""
    bootstrap = admin_bootstrap(body)
    return AdminKafkaView(bootstrap, security=security) if bootstrap else None


@dataclass
class OperatorConfig:
    default_image: str | None = field(default_factory=lambda: os.environ.get("KOPFKA_DEFAULT_IMAGE"))
    # Full re-render of every cluster this often: heals children deleted or edited by hand.
    resync_seconds: float = 300.0
    # How often the roller looks at a cluster (cheap when nothing is stale: two list calls).
    roll_interval_seconds: float = 3.0
    kafka_view: Callable[[Mapping[str, Any], ClientSecurity | None], KafkaView | None] = default_view
    # The scaler's data mover for a cluster body, with the operator's credentials for it (None:
    # scaling moves no data, waits instead).
    data_mover: Callable[[Mapping[str, Any], ClientSecurity | None], Awaitable[DataMover | None]] | None = field(
        default_factory=MoverFactory
    )


def configure_settings(settings: kopf.OperatorSettings) -> None:
    """Keep kopf's bookkeeping in kopfka.io annotations, so the status schema stays strict."""
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    # No CRD scanning: it needs cluster-wide read access a namespaced install does not grant.
    settings.scanning.disabled = True
    # A timer tick (the roll, the resync) that is running when its cluster is deleted holds the
    # deletion until kopf looks again: kopf's default look is every 60 s, which left the finalizer
    # (and `kubectl delete`) waiting a minute for a tick that ends in a second or two.
    settings.background.cancellation_polling = 1


async def default_login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In-cluster service account first, then kubeconfig (via the kubernetes client if present)."""
    info = kopf.login_with_service_account(**kwargs)
    if info is None:
        try:
            info = kopf.login_via_client(**kwargs)
        except ImportError:
            info = kopf.login_with_kubeconfig(**kwargs)
    return info


def _retry_on_api_errors(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """API hiccups are temporary: let kopf retry the handler instead of giving up."""

    @functools.wraps(fn)
    async def wrapper(**kwargs: Any) -> Any:
        try:
            return await fn(**kwargs)
        except ApiError as exc:
            if exc.status in (400, 403, 422):
                raise kopf.TemporaryError(f"API refused: {exc}", delay=60) from exc
            raise kopf.TemporaryError(f"API error: {exc}", delay=5) from exc
        except aiohttp.ClientError as exc:
            raise kopf.TemporaryError(f"API unreachable: {exc}", delay=5) from exc

    return wrapper


def register(
    registry: kopf.OperatorRegistry,
    config: OperatorConfig | None = None,
    login: LoginFn = default_login,
) -> None:
    cfg = config or OperatorConfig()
    apis: dict[str, KubeApi] = {}
    # kopf serializes a resource's change handlers but runs its timers beside them: one lock per
    # cluster keeps a reconcile, a resync and a roll/scale step from interleaving (two first
    # reconciles of a new cluster would each make a cluster id).
    locks: dict[tuple[str, str], asyncio.Lock] = {}

    def lock(body: kopf.Body) -> asyncio.Lock:
        key = (body.metadata.namespace or "", body.metadata.name or "")
        return locks.setdefault(key, asyncio.Lock())

    def api() -> KubeApi:
        if "current" not in apis:
            raise kopf.TemporaryError("not logged in yet", delay=1)
        return apis["current"]

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure_settings(settings)

    @kopf.on.login(registry=registry)
    async def login_handler(**kwargs: Any) -> kopf.ConnectionInfo | None:
        info = await login(**kwargs)
        if info is not None:
            old = apis.get("current")
            apis["current"] = KubeApi(info)
            if old is not None:
                await old.close()
        return info

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        await autoscaler.close()
        if "current" in apis:
            await apis.pop("current").close()
        if isinstance(cfg.data_mover, MoverFactory):
            await cfg.data_mover.pool.close()

    @kopf.on.resume(GROUP, VERSION, PLURAL, registry=registry)
    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
    @kopf.on.update(GROUP, VERSION, PLURAL, registry=registry)
    @_retry_on_api_errors
    async def apply_spec(body: kopf.Body, **_: Any) -> None:
        async with lock(body):
            await reconcile(api(), await _live(body), cfg.default_image)

    async def _live(body: kopf.Body) -> Mapping[str, Any]:
        """The object as it is now: a handler that waited for the lock holds an older body."""
        fresh = await api().get("KafkaCluster", body.metadata.namespace or "", body.metadata.name or "")
        return fresh if fresh is not None else body

    @kopf.timer(
        GROUP,
        VERSION,
        PLURAL,
        registry=registry,
        interval=cfg.resync_seconds,
        initial_delay=cfg.resync_seconds,
    )
    @_retry_on_api_errors
    async def resync(body: kopf.Body, **_: Any) -> None:
        if not body.metadata.get("deletionTimestamp"):
            async with lock(body):
                await reconcile(api(), await _live(body), cfg.default_image)

    roll_contexts: dict[tuple[str, str], RollContext] = {}
    autoscaler = Autoscaler()
    credentials = OperatorCredentials()

    @kopf.timer(GROUP, VERSION, PLURAL, registry=registry, interval=cfg.roll_interval_seconds, idle=0)
    @_retry_on_api_errors
    async def roll(body: kopf.Body, logger: logging.Logger, **_: Any) -> None:
        """Rolling restarts, live config and metadata.version, one step per tick."""
        if body.metadata.get("deletionTimestamp"):
            return
        async with lock(body):
            await _roll(body, logger)

    async def _roll(body: kopf.Body, logger: logging.Logger) -> None:
        key = (body.metadata.namespace or "", body.metadata.name or "")

        def emit(type_: str, reason: str, message: str) -> None:
            kopf.event(body, type=type_, reason=reason, message=message)
            logger.info("%s: %s", reason, message)

        spec = body.get("spec") or {}
        timeout = float((spec.get("rollingUpdate") or {}).get("blockedTimeoutSeconds", DEFAULT_BLOCKED_TIMEOUT))
        ctx = roll_contexts.get(key)
        if ctx is None:
            ctx = roll_contexts[key] = RollContext(api(), None, emit)
        ctx.api, ctx.emit, ctx.blocked_timeout = api(), emit, timeout
        security = await credentials.for_body(api(), body)
        ctx.view = cfg.kafka_view(body, security)
        scaled = await _scale(body, ctx.view, emit, security)
        patch = await roll_step(ctx, body)
        if scaled is not None:
            patch = {**(patch or {}), "scale": scaled}
        autoscaled = await _autoscale(body, ctx.view, emit)
        if autoscaled is not None:
            patch = {**(patch or {}), **autoscaled}
        log_dirs = await _log_dirs(body, ctx.view, emit)
        if log_dirs is not None:
            patch = {**(patch or {}), "logDirs": log_dirs}
        if patch is not None:
            await api().patch("KafkaCluster", key[0], key[1], {"status": patch}, subresource="status")
            if scaled is not None:  # the allowed replica counts changed: render them
                fresh = await api().get("KafkaCluster", key[0], key[1])
                if fresh is not None:
                    await reconcile(api(), fresh, cfg.default_image)
            await refresh_status(api(), key[0], key[1], cfg.default_image)

    async def _log_dirs(body: kopf.Body, view: KafkaView | None, emit: Callable[[str, str, str], None]) -> Any:
        """status.logDirs when the cluster's failed disks changed (None: unchanged or unknown)."""
        if not isinstance(view, AdminKafkaView):
            return None
        before = ((body.get("status") or {}).get("logDirs") or {}).get("offline") or []
        try:
            live, offline = await read_offline_dirs(view)
        except (OSError, TimeoutError, ConnectionError, AdminError):
            return None  # no broker reachable: keep what status says until one answers
        found = log_dirs_status(offline, live, before)
        if list(before) == found["offline"]:
            return None
        for event in changes(before, found["offline"]):
            emit(*event)
        return found

    async def _autoscale(body: kopf.Body, view: KafkaView | None, emit: Callable[[str, str, str], None]) -> Any:
        try:
            spec = parse_spec(body.get("spec") or {}, cfg.default_image)
        except SpecError:
            return None
        return await autoscaler.step(api(), body, spec, view, emit)

    async def _scale(
        body: kopf.Body, view: KafkaView | None, emit: Callable[[str, str, str], None], security: ClientSecurity | None
    ) -> Any:
        try:
            spec = parse_spec(body.get("spec") or {}, cfg.default_image)
        except SpecError:
            return None
        running: dict[str, int] = {}
        sets: dict[str, Any] = {}
        for pool in spec.pools:
            sts = await api().get(
                "StatefulSet", body.metadata.namespace or "", pool_name(body.metadata.name or "", pool.role)
            )
            if sts is not None:
                running[pool.role] = int((sts.get("spec") or {}).get("replicas") or 0)
                sets[pool.role] = sts
        admin = view if isinstance(view, AdminKafkaView) else None
        mover = await cfg.data_mover(body, security) if cfg.data_mover is not None else None
        return await scale_step(ScaleContext(view, admin, mover, emit, api()), body, spec, running, sets)

    @kopf.on.delete(GROUP, VERSION, PLURAL, registry=registry)
    @_retry_on_api_errors
    async def deleted(body: kopf.Body, logger: logging.Logger, **_: Any) -> None:
        claims = await delete_claims(api(), body)
        if isinstance(cfg.data_mover, MoverFactory):
            await cfg.data_mover.pool.forget((body.metadata.namespace or "", body.metadata.name or ""))
        if claims:
            logger.info("deleted PVCs of deleteClaim volumes: %s", ", ".join(claims))

    @kopf.on.event("apps", "v1", "statefulsets", labels=CHILD_LABELS, registry=registry)
    @kopf.on.event("v1", "pods", labels=CHILD_LABELS, registry=registry)
    @_retry_on_api_errors
    async def child_changed(body: kopf.Body, **_: Any) -> None:
        """Ready counts and init-container failures flow into the owner's status."""
        name = body.metadata.labels.get(LABEL_CLUSTER)
        namespace = body.metadata.namespace
        if not name or not namespace:
            return
        owner = await api().get("KafkaCluster", namespace, name)
        if owner is None or owner["metadata"].get("deletionTimestamp"):
            return
        await refresh_status(api(), namespace, name, cfg.default_image)

    async def security(key: tuple[str, str]) -> ClientSecurity | None:
        return await credentials.get(api(), *key)

    register_topics(registry, ResourceConfig(resync_seconds=cfg.resync_seconds, security=security, kube=api))
