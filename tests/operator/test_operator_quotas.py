"""Quota resources reconciled into a real kopfka broker's client quotas by a real kopf operator
(kmock API): every entity kind, updates, drift, delete of exactly its keys, and conflicts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kopfka.client.quotas import alter_client_quotas, describe_client_quotas
from kopfka_operator.kube import KubeApi
from kopfka_operator.resource_handlers import ResourceConfig
from operator_testlib import eventually
from resources_testlib import (
    NS,
    admin_of,
    cond,
    condition_is,
    events_of,
    events_with_reason,
    kube_api,
    quota_obj,
    resolver,
    running_operator,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def api(k8s: Any) -> AsyncIterator[KubeApi]:
    async with kube_api(k8s.server_url) as client:
        yield client


@pytest.fixture
async def operator(k8s: Any, kopfka: Any) -> AsyncIterator[ResourceConfig]:
    """A broker per test (quotas are cluster-wide state) and an operator resyncing every second."""
    config = ResourceConfig(resync_seconds=1, bootstrap=resolver({"demo": kopfka.bootstrap}))
    async with running_operator(k8s.server_url, config):
        yield config


async def quotas(bs: str) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    async with admin_of(bs) as admin:
        return {tuple(sorted(entity)): values for entity, values in await describe_client_quotas(admin)}


async def ready(api: KubeApi, name: str) -> Any:
    return await eventually(lambda: condition_is(api, "Quota", name, "Ready", "True"))


async def _quotas_are(bs: str, wanted: dict[Any, dict[str, float]]) -> bool:
    return await quotas(bs) == wanted


async def test_every_entity_kind_and_default(kopfka: Any, api: KubeApi, operator: ResourceConfig) -> None:
    specs = {
        "alice": ({"user": {"name": "alice"}}, {"producerByteRate": 1024, "requestPercentage": 12.5}),
        "any-user": ({"user": {"default": True}}, {"consumerByteRate": 2048}),
        "app": ({"clientId": {"name": "app"}}, {"controllerMutationRate": 5}),
        "any-client": ({"clientId": {"default": True}}, {"producerByteRate": 4096}),
        "alice-app": ({"user": {"name": "alice"}, "clientId": {"name": "app"}}, {"producerByteRate": 512}),
        "alice-any": ({"user": {"name": "alice"}, "clientId": {"default": True}}, {"consumerByteRate": 256}),
        "host": ({"ip": {"name": "10.1.2.3"}}, {"connectionCreationRate": 7}),
        "any-ip": ({"ip": {"default": True}}, {"connectionCreationRate": 50}),
    }
    for name, (entity, values) in specs.items():
        await api.create(NS, quota_obj(name, entity, **values))
    for name in specs:
        await ready(api, name)
    assert await quotas(kopfka.bootstrap) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        (("user", None),): {"consumer_byte_rate": 2048.0},
        (("client-id", "app"),): {"controller_mutation_rate": 5.0},
        (("client-id", None),): {"producer_byte_rate": 4096.0},
        (("client-id", "app"), ("user", "alice")): {"producer_byte_rate": 512.0},
        (("client-id", None), ("user", "alice")): {"consumer_byte_rate": 256.0},
        (("ip", "10.1.2.3"),): {"connection_creation_rate": 7.0},
        (("ip", None),): {"connection_creation_rate": 50.0},
    }
    alice = await api.get("Quota", NS, "alice-any")
    assert alice["status"]["entity"] == "client-id=<default>,user=alice"
    assert alice["status"]["applied"] == {"consumerByteRate": 256}


async def test_update_drift_and_delete_of_exactly_its_keys(kopfka: Any, api: KubeApi, operator: ResourceConfig) -> None:
    bs = kopfka.bootstrap
    bob = (("user", "bob"),)
    async with admin_of(bs) as admin:  # a key of the same entity set by another admin client
        await alter_client_quotas(admin, [("user", "bob")], {"consumer_byte_rate": 999})
    await api.create(NS, quota_obj("bob", {"user": {"name": "bob"}}, producerByteRate=1000, requestPercentage=10))
    obj = await ready(api, "bob")
    assert obj["status"]["applied"] == {"producerByteRate": 1000, "requestPercentage": 10}
    # The other key is not this resource's: the resync leaves it alone.
    assert await quotas(bs) == {
        bob: {"consumer_byte_rate": 999.0, "producer_byte_rate": 1000.0, "request_percentage": 10.0}
    }

    # Update: a value changes, a key goes.
    await api.patch("Quota", NS, "bob", {"spec": {"producerByteRate": 2000, "requestPercentage": None}})
    await eventually(lambda: _quotas_are(bs, {bob: {"consumer_byte_rate": 999.0, "producer_byte_rate": 2000.0}}))
    obj = await ready(api, "bob")
    assert obj["status"]["applied"] == {"producerByteRate": 2000}

    # Drift: changed and removed outside, put back on the resync, reported.
    async with admin_of(bs) as admin:
        await alter_client_quotas(admin, [("user", "bob")], {"producer_byte_rate": 5})
    await eventually(lambda: _quotas_are(bs, {bob: {"consumer_byte_rate": 999.0, "producer_byte_rate": 2000.0}}))
    drift = await events_with_reason(api, "bob", "Drift")
    assert drift and "producerByteRate 5 (spec 2000)" in drift[0]["message"]
    async with admin_of(bs) as admin:
        await alter_client_quotas(admin, [("user", "bob")], remove=["producer_byte_rate"])
    await eventually(lambda: _quotas_are(bs, {bob: {"consumer_byte_rate": 999.0, "producer_byte_rate": 2000.0}}))

    # Delete: exactly its key goes; the outsider's stays.
    await api.delete("Quota", NS, "bob")
    await eventually(lambda: _gone(api, "bob"))
    assert await quotas(bs) == {bob: {"consumer_byte_rate": 999.0}}


async def _gone(api: KubeApi, name: str) -> bool:
    return await api.get("Quota", NS, name) is None


async def test_a_conflict_is_reported_on_the_newer_resource_not_fought_over(
    k8s: Any, kopfka: Any, api: KubeApi, operator: ResourceConfig
) -> None:
    bs = kopfka.bootstrap
    carol = (("client-id", "carol"),)
    await api.create(NS, quota_obj("older", {"clientId": {"name": "carol"}}, producerByteRate=100))
    await ready(api, "older")
    await asyncio.sleep(1.1)  # creationTimestamp has whole seconds
    await api.create(
        NS, quota_obj("newer", {"clientId": {"name": "carol"}}, producerByteRate=200, consumerByteRate=300)
    )
    obj = await eventually(lambda: condition_is(api, "Quota", "newer", "Ready", "False", "Conflict"))
    assert f"producerByteRate of client-id=carol is set by Quota {NS}/older" in cond(obj, "Ready")["message"]
    assert obj["status"]["applied"] == {"consumerByteRate": 300}  # its key without a conflict
    assert await quotas(bs) == {carol: {"producer_byte_rate": 100.0, "consumer_byte_rate": 300.0}}
    conflicts = await events_with_reason(api, "newer", "Conflict")
    assert len(conflicts) == 1 and conflicts[0]["type"] == "Warning"
    assert cond(await api.get("Quota", NS, "older"), "Ready")["status"] == "True"

    # No tug of war over several resyncs: the value holds and neither status is rewritten.
    before = len(k8s.writes)
    await asyncio.sleep(3.5)
    assert [w for w in k8s.writes[before:] if w[1] == "quotas"] == []
    assert await quotas(bs) == {carol: {"producer_byte_rate": 100.0, "consumer_byte_rate": 300.0}}
    assert len([e for e in await events_of(api, "newer") if e["reason"] == "Conflict"]) == 1

    # The older one goes: its key is removed and the newer one takes it over on its resync.
    await api.delete("Quota", NS, "older")
    await eventually(lambda: condition_is(api, "Quota", "newer", "Ready", "True"), timeout=15)
    await eventually(lambda: _quotas_are(bs, {carol: {"producer_byte_rate": 200.0, "consumer_byte_rate": 300.0}}))


async def test_an_invalid_entity_is_refused_with_kafkas_message(
    kopfka: Any, api: KubeApi, operator: ResourceConfig
) -> None:
    await api.create(NS, quota_obj("bad-ip", {"ip": {"name": "not-an-ip"}}, connectionCreationRate=3))
    obj = await eventually(lambda: condition_is(api, "Quota", "bad-ip", "Ready", "False", "InvalidRequest"))
    assert "not-an-ip is not a valid IP address" in cond(obj, "Ready")["message"]
    assert await quotas(kopfka.bootstrap) == {}


async def test_the_entity_cannot_change(kopfka: Any, api: KubeApi, operator: ResourceConfig) -> None:
    """The CRD refuses it (CEL); a server without CEL gets the same answer from the operator."""
    await api.create(NS, quota_obj("dave", {"user": {"name": "dave"}}, producerByteRate=1000))
    await ready(api, "dave")
    await api.patch("Quota", NS, "dave", {"spec": {"entity": {"user": {"name": "eve"}}}})
    obj = await eventually(lambda: condition_is(api, "Quota", "dave", "Ready", "False", "EntityChanged"))
    assert "from user=dave to user=eve" in cond(obj, "Ready")["message"]
    assert await quotas(kopfka.bootstrap) == {(("user", "dave"),): {"producer_byte_rate": 1000.0}}
