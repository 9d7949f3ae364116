"""Helpers for the Topic/Quota operator tests: a real kopf operator with only the Topic and
Quota handlers (in its own thread and loop, as in test_operator_kopf.py) against the kmock API
server, pointed at real kopfka brokers on loopback."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import kopf
from kopfka.client.admin import Admin
from kopfka.security.client import ClientSecurity
from kopfka_operator.handlers import configure_settings
from kopfka_operator.kube import KubeApi
from kopfka_operator.resource_handlers import ResourceConfig, register_topics
from kopfka_operator.security.credentials import OperatorCredentials
from operator_testlib import eventually, running_kopf

NS = "kafka"
TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG = 1, 2


@contextlib.asynccontextmanager
async def running_operator(server_url: str, config: ResourceConfig, credentials: bool = False) -> AsyncIterator[None]:
    """Topic, Quota and User handlers with an API client of their own (made in kopf's loop);
    `credentials`: the operator's certificate from its Secret for secured clusters."""
    registry = kopf.OperatorRegistry()
    kube: dict[str, KubeApi] = {}

    def api() -> KubeApi:
        return kube.setdefault("api", KubeApi(kopf.ConnectionInfo(server=server_url)))

    config.kube = config.kube or api
    if credentials:
        cache = OperatorCredentials()

        async def security(key: tuple[str, str]) -> ClientSecurity | None:
            return await cache.get(api(), *key)

        config.security = security

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=server_url)

    @kopf.on.cleanup(registry=registry)
    async def close(**_: Any) -> None:
        if "api" in kube:
            await kube["api"].close()

    register_topics(registry, config)
    settings = kopf.OperatorSettings()
    configure_settings(settings)
    settings.posting.enabled = True
    async with running_kopf(registry, settings, [NS]):
        yield


@contextlib.asynccontextmanager
async def kube_api(server_url: str) -> AsyncIterator[KubeApi]:
    """An API client, with the KafkaCluster `demo` the resources of the tests belong to."""
    client = KubeApi(kopf.ConnectionInfo(server=server_url))
    await client.create(NS, cluster_obj("demo"))
    try:
        yield client
    finally:
        await client.close()


def resolver(addresses: Mapping[str, str]) -> Callable[[Mapping[str, Any]], str | None]:
    """KafkaCluster name -> a local broker (instead of the in-cluster DNS name in its status)."""
    return lambda body: addresses.get(body["metadata"]["name"])


def cluster_obj(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kopfka.io/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"brokers": {"replicas": 1, "storage": {"volumes": [{"id": 0, "size": "1Gi"}]}}},
    }


def topic_obj(
    name: str, cluster: str = "demo", annotations: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": {"kopfka.io/cluster": cluster}}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "kopfka.io/v1alpha1", "kind": "Topic", "metadata": meta, "spec": spec}


def quota_obj(name: str, entity: dict[str, Any], cluster: str = "demo", **values: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kopfka.io/v1alpha1",
        "kind": "Quota",
        "metadata": {"name": name, "namespace": NS, "labels": {"kopfka.io/cluster": cluster}},
        "spec": {"entity": entity, **values},
    }


def cond(obj: Mapping[str, Any], type_: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return {}


async def condition_is(api: KubeApi, kind: str, name: str, type_: str, value: str, reason: str | None = None) -> Any:
    obj = await api.get(kind, NS, name)
    c = cond(obj or {}, type_)
    if c.get("status") == value and (reason is None or c.get("reason") == reason):
        if c.get("observedGeneration") == (obj or {})["metadata"].get("generation"):
            return obj
    return None


async def events_of(api: KubeApi, name: str) -> list[dict[str, Any]]:
    events = await api.list("Event", NS, "")
    return [e for e in events if (e.get("involvedObject") or {}).get("name") == name]


async def events_with_reason(api: KubeApi, name: str, reason: str, timeout: float = 15.0) -> list[dict[str, Any]]:
    """The object's events of one reason, once there is one: kopf posts events from a background
    task, so an event can land after the change that caused it is already visible."""

    async def found() -> list[dict[str, Any]]:
        return [e for e in await events_of(api, name) if e["reason"] == reason]

    result: list[dict[str, Any]] = await eventually(found, timeout=timeout)
    return result


@contextlib.asynccontextmanager
async def admin_of(bootstrap: str) -> AsyncIterator[Admin]:
    admin = await Admin.connect(bootstrap.split(",")[0])
    try:
        yield admin
    finally:
        await admin.close()


async def overrides(bootstrap: str, topic: str) -> dict[str, str | None]:
    async with admin_of(bootstrap) as admin:
        configs = await admin.describe_configs(TOPIC, topic)
    return {c.name: c.value for c in configs if c.config_source == DYNAMIC_TOPIC_CONFIG}


async def partitions_of(bootstrap: str, topic: str) -> list[list[int]] | None:
    """Each partition's replicas, or None when the topic does not exist."""
    async with admin_of(bootstrap) as admin:
        found = await admin.describe_topics([topic])
    info = found.get(topic)
    if info is None or isinstance(info, Exception):
        return None
    return [p.replicas for p in info.partitions]
