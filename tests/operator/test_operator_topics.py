"""Topic resources reconciled into a real kopfka broker by a real kopf operator (kmock API).

One broker serves the module (each test uses its own topic names); every test gets a fresh
API server and operator. The replication-factor test runs its own 3-broker KRaft cluster.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kopfka import uuids
from kopfka.client.admin import Admin, NewTopic
from kopfka_operator.kube import KubeApi
from kopfka_operator.resource_handlers import ResourceConfig
from operator_testlib import eventually
from resources_testlib import (
    BROKER,
    DYNAMIC_BROKER_CONFIG,
    NS,
    TOPIC,
    admin_of,
    cluster_obj,
    cond,
    condition_is,
    events_with_reason,
    kube_api,
    overrides,
    partitions_of,
    resolver,
    running_operator,
    topic_obj,
)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
async def api(k8s: Any) -> AsyncIterator[KubeApi]:
    async with kube_api(k8s.server_url) as client:
        yield client


@pytest.fixture
def config(kopfka_shared: Any) -> ResourceConfig:
    return ResourceConfig(resync_seconds=3600, bootstrap=resolver({"demo": kopfka_shared.bootstrap}))


@pytest.fixture
async def operator(k8s: Any, config: ResourceConfig) -> AsyncIterator[ResourceConfig]:
    async with running_operator(k8s.server_url, config):
        yield config


async def ready(api: KubeApi, name: str) -> Any:
    return await eventually(lambda: condition_is(api, "Topic", name, "Ready", "True"))


async def test_create_then_every_update_kind(kopfka_shared: Any, api: KubeApi, operator: ResourceConfig) -> None:
    bs = kopfka_shared.bootstrap
    # A Kafka name a Kubernetes name cannot hold.
    await api.create(NS, topic_obj("orders", topicName="Orders_V1", partitions=3, config={"retention.ms": 3600000}))
    obj = await ready(api, "orders")
    status = obj["status"]
    assert status["topicName"] == "Orders_V1"
    assert status["partitions"] == 3 and status["replicationFactor"] == 1
    assert status["config"] == {"retention.ms": "3600000"}
    assert len(status["topicId"]) == 22
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    assert cond(obj, "Reconciling")["status"] == "False"
    assert "adopted" not in status
    assert obj["metadata"]["finalizers"] == ["kopfka.io/finalizer"]
    assert len(await partitions_of(bs, "Orders_V1") or []) == 3
    assert await overrides(bs, "Orders_V1") == {"retention.ms": "3600000"}

    # Partitions up, one config changed, one added, one removed: all in one edit.
    await api.patch("Topic", NS, "orders", {"spec": {"config": {"retention.ms": None}}})
    await ready(api, "orders")
    assert await overrides(bs, "Orders_V1") == {}
    await api.patch(
        "Topic",
        NS,
        "orders",
        {"spec": {"partitions": 5, "config": {"cleanup.policy": "compact", "segment.bytes": 1048576}}},
    )
    obj = await ready(api, "orders")
    assert await overrides(bs, "Orders_V1") == {"cleanup.policy": "compact", "segment.bytes": "1048576"}
    assert len(await partitions_of(bs, "Orders_V1") or []) == 5
    assert obj["status"]["partitions"] == 5
    assert obj["status"]["config"] == {"cleanup.policy": "compact", "segment.bytes": "1048576"}
    assert obj["status"]["topicId"] == status["topicId"]  # the same topic, changed in place


async def test_refusals_leave_the_topic_as_it_was_without_a_retry_loop(
    k8s: Any, kopfka_shared: Any, api: KubeApi, operator: ResourceConfig
) -> None:
    bs = kopfka_shared.bootstrap
    # An invalid config at creation: Kafka's own message, nothing created.
    await api.create(NS, topic_obj("born-bad", partitions=2, config={"retention.ms": "soon"}))
    obj = await eventually(lambda: condition_is(api, "Topic", "born-bad", "Ready", "False", "InvalidConfig"))
    assert "Invalid value 'soon' for configuration retention.ms" in cond(obj, "Ready")["message"]
    assert await partitions_of(bs, "born-bad") is None

    await api.create(NS, topic_obj("stable", partitions=4, config={"retention.ms": 1000}))
    await ready(api, "stable")

    # Fewer partitions: refused with Kafka's message, no change made.
    await api.patch("Topic", NS, "stable", {"spec": {"partitions": 2, "config": {"retention.ms": 2000}}})
    obj = await eventually(lambda: condition_is(api, "Topic", "stable", "Ready", "False", "InvalidPartitions"))
    message = cond(obj, "Ready")["message"]
    assert message.startswith("INVALID_PARTITIONS: ") and "4 partition" in message, message
    assert cond(obj, "Reconciling")["status"] == "False"
    assert obj["status"]["partitions"] == 4
    assert len(await partitions_of(bs, "stable") or []) == 4
    assert await overrides(bs, "stable") == {"retention.ms": "1000"}  # the same edit's config waits too

    # An unknown config key with a partition increase: neither is applied.
    await api.patch("Topic", NS, "stable", {"spec": {"partitions": 6, "config": {"bogus.key": "1"}}})
    obj = await eventually(lambda: condition_is(api, "Topic", "stable", "Ready", "False", "InvalidConfig"))
    assert "Unknown topic config name: bogus.key" in cond(obj, "Ready")["message"]
    assert obj["status"]["config"] == {"retention.ms": "1000"}  # what Kafka holds
    assert len(await partitions_of(bs, "stable") or []) == 4
    assert await overrides(bs, "stable") == {"retention.ms": "1000"}
    warnings = await events_with_reason(api, "stable", "InvalidConfig")
    assert warnings and warnings[0]["type"] == "Warning"

    # No hot retry loop: nothing is written while the spec stays refused.
    before = len(k8s.writes)
    await asyncio.sleep(3)
    assert [w for w in k8s.writes[before:] if w[2] == "stable"] == []

    # Fixing the spec applies it.
    await api.patch("Topic", NS, "stable", {"spec": {"config": {"bogus.key": None, "retention.ms": 2000}}})
    await ready(api, "stable")
    assert len(await partitions_of(bs, "stable") or []) == 6
    assert await overrides(bs, "stable") == {"retention.ms": "2000"}


async def test_delete_removes_the_topic_unless_retained(
    kopfka_shared: Any, api: KubeApi, operator: ResourceConfig
) -> None:
    bs = kopfka_shared.bootstrap
    await api.create(NS, topic_obj("doomed", partitions=1))
    await api.create(NS, topic_obj("kept", annotations={"kopfka.io/delete-policy": "retain"}, partitions=1))
    await ready(api, "doomed")
    await ready(api, "kept")
    await api.delete("Topic", NS, "doomed")
    await api.delete("Topic", NS, "kept")
    await eventually(lambda: gone(api, "doomed"))
    await eventually(lambda: gone(api, "kept"))
    assert await partitions_of(bs, "doomed") is None
    assert await partitions_of(bs, "kept") == [[1]]


async def all_ready(api: KubeApi, names: list[str]) -> bool:
    """One list call (kmock answers a GET by scanning every object: polling 150 GETs is slow)."""
    items = {o["metadata"]["name"]: o for o in await api.list("Topic", NS, "")}
    return all(cond(items.get(n, {}), "Ready").get("status") == "True" for n in names)


async def gone(api: KubeApi, name: str) -> bool:
    return await api.get("Topic", NS, name) is None


async def test_an_existing_topic_is_adopted_and_brought_to_the_spec(
    kopfka_shared: Any, api: KubeApi, operator: ResourceConfig
) -> None:
    bs = kopfka_shared.bootstrap
    async with admin_of(bs) as admin:
        created = await admin.create_topics([NewTopic("legacy", 2, 1, {"retention.ms": "1000", "segment.ms": "60000"})])
    topic_id = created["legacy"].topic_id  # type: ignore[union-attr]
    await api.create(NS, topic_obj("legacy", partitions=3, config={"retention.ms": 5000}))
    obj = await ready(api, "legacy")
    assert obj["status"]["adopted"] is True
    assert obj["status"]["topicId"] == uuids.to_str(topic_id)
    assert obj["status"]["partitions"] == 3
    assert await overrides(bs, "legacy") == {"retention.ms": "5000"}  # segment.ms was not in the spec
    assert await events_with_reason(api, "legacy", "Adopted")
    # Deleting the resource deletes the adopted topic (no retain annotation).
    await api.delete("Topic", NS, "legacy")
    await eventually(lambda: gone(api, "legacy"))
    assert await partitions_of(bs, "legacy") is None


async def test_two_resources_for_one_topic_the_newer_reports_the_conflict(
    kopfka_shared: Any, api: KubeApi, operator: ResourceConfig
) -> None:
    await api.create(NS, topic_obj("first", topicName="shared.topic", partitions=1, config={"retention.ms": 1000}))
    await ready(api, "first")
    await asyncio.sleep(1.1)  # creationTimestamp has whole seconds
    await api.create(NS, topic_obj("second", topicName="shared.topic", partitions=1, config={"retention.ms": 9000}))
    obj = await eventually(lambda: condition_is(api, "Topic", "second", "Ready", "False", "TopicConflict"))
    assert f"managed by Topic {NS}/first" in cond(obj, "Ready")["message"]
    assert await overrides(kopfka_shared.bootstrap, "shared.topic") == {"retention.ms": "1000"}
    # Deleting the newer one leaves the topic alone.
    await api.delete("Topic", NS, "second")
    await eventually(lambda: gone(api, "second"))
    assert await partitions_of(kopfka_shared.bootstrap, "shared.topic") == [[1]]


async def test_drift_is_put_back_on_resync_and_reported(k8s: Any, kopfka_shared: Any, api: KubeApi) -> None:
    bs = kopfka_shared.bootstrap
    config = ResourceConfig(resync_seconds=1, bootstrap=resolver({"demo": bs}))
    async with admin_of(bs) as admin:  # a topic without a resource: left alone
        await admin.create_topics([NewTopic("unmanaged", 1, 1, {"retention.ms": "1234"})])
    async with running_operator(k8s.server_url, config):
        await api.create(NS, topic_obj("drifting", partitions=2, config={"retention.ms": 1000}))
        first = await ready(api, "drifting")
        async with admin_of(bs) as admin:  # another admin client edits the topic
            await admin.incremental_alter_configs(
                TOPIC, "drifting", [("retention.ms", 0, "77"), ("cleanup.policy", 0, "compact")]
            )
        await eventually(lambda: _overrides_are(bs, "drifting", {"retention.ms": "1000"}), timeout=15)
        drift = await events_with_reason(api, "drifting", "Drift")
        assert drift[0]["type"] == "Warning"
        assert "retention.ms=77 (spec 1000)" in drift[0]["message"]
        assert "cleanup.policy=compact (not in spec)" in drift[0]["message"]

        # Deleted outside: created again (a new topic id).
        async with admin_of(bs) as admin:
            await admin.delete_topic("drifting")
        obj = await eventually(lambda: _new_id(api, "drifting", first["status"]["topicId"]), timeout=15)
        assert cond(obj, "Ready")["status"] == "True"
        assert await overrides(bs, "drifting") == {"retention.ms": "1000"}
        assert len(await partitions_of(bs, "drifting") or []) == 2
        await asyncio.sleep(1.5)
    assert await overrides(bs, "unmanaged") == {"retention.ms": "1234"}


async def _overrides_are(bs: str, topic: str, wanted: dict[str, str]) -> bool:
    return await overrides(bs, topic) == wanted


async def _new_id(api: KubeApi, name: str, old_id: str) -> Any:
    obj = await api.get("Topic", NS, name)
    return obj if obj and obj["status"].get("topicId") not in (None, old_id) else None


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A cluster that is down the worst way: it accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


async def test_a_cluster_down_does_not_stall_the_others(
    k8s: Any, kopfka_shared: Any, api: KubeApi, silent_server: str
) -> None:
    addresses = {"demo": kopfka_shared.bootstrap, "dead": silent_server}
    config = ResourceConfig(
        resync_seconds=3600, request_timeout=8, retry_base_seconds=0.5, bootstrap=resolver(addresses)
    )
    await api.create(NS, cluster_obj("dead"))
    async with running_operator(k8s.server_url, config):
        for i in range(5):
            await api.create(NS, topic_obj(f"dead-{i}", cluster="dead", partitions=1))
        await asyncio.sleep(0.3)  # the dead cluster's batch is under way
        started = asyncio.get_running_loop().time()
        for i in range(5):
            await api.create(NS, topic_obj(f"live-{i}", partitions=1))
        for i in range(5):
            await ready(api, f"live-{i}")
        # before the dead cluster's requests time out (8 s); under load (pytest -n 4) the live ones
        # once took 2.8 s
        assert asyncio.get_running_loop().time() - started < 6
        obj = await eventually(lambda: condition_is(api, "Topic", "dead-0", "Ready", "False", "ClusterUnavailable"))
        assert silent_server in cond(obj, "Ready")["message"]
        assert cond(obj, "Reconciling")["status"] == "True"
        # A Topic without the label, and one naming no existing cluster.
        orphan = topic_obj("orphan", partitions=1)
        del orphan["metadata"]["labels"]
        await api.create(NS, orphan)
        await api.create(NS, topic_obj("lost", cluster="nowhere", partitions=1))
        await eventually(lambda: condition_is(api, "Topic", "orphan", "Ready", "False", "ClusterLabelMissing"))
        await eventually(lambda: condition_is(api, "Topic", "lost", "Ready", "False", "ClusterNotFound"))

        # Retried with backoff, and nothing is written while the cluster stays down.
        before = len(k8s.writes)
        await asyncio.sleep(4)
        assert [w for w in k8s.writes[before:] if w[1] == "topics"] == []
        # The cluster comes back (here: its address changes to a live broker): the retry succeeds.
        addresses["dead"] = kopfka_shared.bootstrap
        await api.patch("KafkaCluster", NS, "dead", {"metadata": {"labels": {"revived": "yes"}}})
        await eventually(lambda: all_ready(api, [f"dead-{i}" for i in range(5)]), timeout=30, interval=0.5)


async def test_many_topics_are_created_in_few_kafka_requests(
    kopfka_shared: Any, api: KubeApi, operator: ResourceConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    original = Admin.create_topics

    async def counting(self: Admin, topics: list[NewTopic], *args: Any, **kwargs: Any) -> Any:
        if topics:
            calls.append(len(topics))
        return await original(self, topics, *args, **kwargs)

    monkeypatch.setattr(Admin, "create_topics", counting)
    names = [f"bulk-{i:03d}" for i in range(150)]
    await asyncio.gather(*(api.create(NS, topic_obj(n, partitions=1, config={"retention.ms": 60000})) for n in names))
    await eventually(lambda: all_ready(api, names), timeout=60, interval=0.5)
    assert sum(calls) == 150
    assert len(calls) <= 10, calls  # batched, not one request per topic
    async with admin_of(kopfka_shared.bootstrap) as admin:
        found = await admin.describe_topics(names)
    assert all(not isinstance(v, Exception) for v in found.values()) and len(found) == 150


@pytest.fixture
def three_brokers(tmp_path: Path) -> Iterator[Any]:
    sys.path.insert(0, str(Path(__file__).parents[1] / "kraft"))
    from cluster import FAST, Cluster

    c = Cluster(tmp_path / "rf", 1, 3, props={**FAST, "replica.fetch.wait.max.ms": "100"})
    c.format_all()
    try:
        yield c.start()
    finally:
        c.stop()


async def _dynamic_configs(bs: str, rtype: int, name: str) -> dict[str, str | None]:
    """A topic's overrides, or a broker's own dynamic configs (asked of that broker)."""
    if rtype == BROKER:
        bs = bs.split(",")[int(name)]
    async with admin_of(bs) as admin:
        configs = await admin.describe_configs(rtype, name)
    source = DYNAMIC_BROKER_CONFIG if rtype == BROKER else 1
    return {c.name: c.value for c in configs if c.config_source == source}


async def test_replication_factor_change_is_a_throttled_reassignment(
    k8s: Any, api: KubeApi, three_brokers: Any
) -> None:
    from confluent_kafka import Producer

    bs = three_brokers.bootstrap()
    throttle = 150_000
    config = ResourceConfig(
        resync_seconds=3600,
        reassignment_throttle=throttle,
        reassignment_poll_seconds=0.5,
        bootstrap=resolver({"demo": bs}),
    )
    async with running_operator(k8s.server_url, config):
        await api.create(NS, topic_obj("moving", partitions=3, replicationFactor=1))
        await ready(api, "moving")
        producer = Producer({"bootstrap.servers": bs, "linger.ms": 20})
        for i in range(600):
            producer.produce("moving", b"x" * 1000, partition=i % 3)
        assert producer.flush(30) == 0

        await api.patch("Topic", NS, "moving", {"spec": {"replicationFactor": 3}})
        obj = await eventually(lambda: _reassigning(api, "moving"))
        progress = obj["status"]["reassignment"]
        assert progress["targetReplicationFactor"] == 3 and progress["partitions"] == 3
        assert progress["throttleBytesPerSecond"] == throttle
        assert cond(obj, "Reconciling")["reason"] == "ReassigningReplicas"
        assert "partitions moved" in cond(obj, "Reconciling")["message"]
        assert cond(obj, "Ready")["status"] == "True"  # the topic serves throughout
        topic_throttles = await _dynamic_configs(bs, TOPIC, "moving")
        assert topic_throttles.get("leader.replication.throttled.replicas")
        assert topic_throttles.get("follower.replication.throttled.replicas")
        broker_throttles = await _dynamic_configs(bs, BROKER, "0")
        assert broker_throttles.get("follower.replication.throttled.rate") == str(throttle)

        obj = await eventually(lambda: _replicated(api, "moving", 3), timeout=90, interval=0.2)
        assert "reassignment" not in obj["status"]
        assert cond(obj, "Reconciling")["status"] == "False"
        assert all(len(r) == 3 for r in await partitions_of(bs, "moving") or [])
        assert await _dynamic_configs(bs, TOPIC, "moving") == {}  # throttles off again
        for b in ("0", "1", "2"):
            assert await _dynamic_configs(bs, BROKER, b) == {}
        assert await events_with_reason(api, "moving", "ReassignmentDone")

        # Down to 2: one replica of each partition goes, the preferred leader stays.
        before = await partitions_of(bs, "moving") or []
        await api.patch("Topic", NS, "moving", {"spec": {"replicationFactor": 2}})
        await eventually(lambda: _replicated(api, "moving", 2), timeout=60, interval=0.2)
        after = await partitions_of(bs, "moving") or []
        assert [r[:2] for r in before] == after

        # More than there are brokers: refused with the reason, nothing moves.
        await api.patch("Topic", NS, "moving", {"spec": {"replicationFactor": 4}})
        obj = await eventually(
            lambda: condition_is(api, "Topic", "moving", "Ready", "False", "InvalidReplicationFactor")
        )
        assert "only 3 broker(s) are registered" in cond(obj, "Ready")["message"]
        assert await partitions_of(bs, "moving") == after


async def _reassigning(api: KubeApi, name: str) -> Any:
    obj = await api.get("Topic", NS, name)
    return obj if obj and obj.get("status", {}).get("reassignment") else None


async def _replicated(api: KubeApi, name: str, rf: int) -> Any:
    obj = await condition_is(api, "Topic", name, "Ready", "True")
    if obj and obj["status"].get("replicationFactor") == rf and "reassignment" not in obj["status"]:
        return obj
    return None
