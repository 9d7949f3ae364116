"""Snapshot-driven metadata log truncation and FetchSnapshot catch-up (KIP-630).

With tiny metadata segments, frequent snapshots and `metadata.max.retention.bytes=0`, every node
drops the segments below its latest snapshot. A broker and a follower controller that were down
meanwhile come back with fetch offsets below the leader's log start: the leader answers their
raft Fetch with its snapshot id, they load it with FetchSnapshot and continue with the log tail —
and end up with exactly the image of a node that never went away.
"""

from __future__ import annotations

import re
from typing import Any

from cluster import Cluster, describe_quorum, metadata, request, run, wait_until

PROPS = {
    "internal.metadata.log.segment.bytes": "2048",
    "metadata.log.max.record.bytes.between.snapshots": "1500",
    "metadata.max.retention.bytes": "0",
}
START_RE = re.compile(r"metadata log start offset is now (\d+)")


async def create_with_config(addr: str, name: str, retention_ms: int) -> Any:
    body = {
        "timeout": 15000,
        "validate_only": False,
        "topics": [
            {
                "name": name,
                "num_partitions": 2,
                "replication_factor": 1,
                "assignments": [],
                "configs": [{"name": "retention.ms", "value": str(retention_ms)}],
            }
        ],
    }
    return (await request(addr, 19, 7, body, timeout=30)).topics[0]


async def delete_topic(addr: str, name: str) -> Any:
    body = {"topic_names": [name], "timeout": 15000}
    return (await request(addr, 20, 4, body, timeout=30)).responses[0]


def image_view(addr: str) -> dict[str, Any]:
    """Topics with ids, partitions (replicas, leaders) and their dynamic configs, as a broker serves them."""
    m = run(metadata(addr))
    names = sorted(t.name for t in m.topics)
    configs: dict[str, dict[str, str]] = {}
    if names:
        body = {
            "resources": [{"resource_type": 2, "resource_name": n, "configuration_keys": None} for n in names],
            "include_synonyms": False,
            "include_documentation": False,
        }
        resp = run(request(addr, 32, 4, body))
        for r in resp.results:
            configs[r.resource_name] = {
                c.name: c.value for c in r.configs if c.config_source == 1  # DYNAMIC_TOPIC_CONFIG
            }
    return {
        t.name: (
            str(t.topic_id),
            sorted((p.partition_index, tuple(p.replica_nodes)) for p in t.partitions),
            configs.get(t.name, {}),
        )
        for t in m.topics
    }


def log_start(node: Any) -> int:
    found = [int(x) for x in START_RE.findall(node.log_text())]
    return max(found, default=0)


def test_lagging_broker_and_controller_catch_up_through_fetch_snapshot(make_cluster: Any) -> None:
    c: Cluster = make_cluster(3, 2, props=PROPS).start()
    b0, b1 = c.brokers
    for i in range(3):
        assert run(create_with_config(b0.address, f"early-{i}", 1000 + i)).error_code == 0
    leader = c.leader()
    follower = next(x for x in c.controllers if x is not leader)
    b1.kill()
    follower.kill()
    hw_at_kill = int(run(describe_quorum(leader.address)).topics[0].partitions[0].high_watermark)

    for i in range(40):
        res = run(create_with_config(b0.address, f"t-{i}", 60_000 + i))
        assert res.error_code == 0, res.error_message
    for i in range(0, 40, 4):
        assert run(delete_topic(b0.address, f"t-{i}")).error_code == 0
    assert run(delete_topic(b0.address, "early-0")).error_code == 0

    wait_until(lambda: log_start(leader) > hw_at_kill, 20, "the leader to truncate its log past the lagging nodes")
    seg_dir = leader.dir / "metadata" / "__cluster_metadata-0"
    first_segment = min(int(p.stem) for p in seg_dir.glob("*.log"))
    assert first_segment > hw_at_kill, "segments below the snapshot were not deleted"
    assert log_start(b0) > 0, "the observer broker never truncated its own metadata log"

    b1.start()
    follower.start()
    b1.wait_ready(40)
    follower.wait_ready(40)
    for node in (b1, follower):
        text = node.log_text()
        assert "from the leader; loading it" in text and "loaded snapshot" in text, text[-3000:]

    expected = image_view(b0.address)
    assert "t-0" not in expected and "early-0" not in expected and "t-1" in expected
    assert expected["t-1"][2] == {"retention.ms": "60001"}
    wait_until(lambda: image_view(b1.address) == expected, 15, "the restarted broker's image to equal broker 0's")

    def controller_caught_up() -> bool:
        p = run(describe_quorum(c.leader().address)).topics[0].partitions[0]
        leos = {v.replica_id: v.log_end_offset for v in p.current_voters}
        return leos.get(follower.node_id, -1) >= p.high_watermark

    wait_until(controller_caught_up, 15, "the restarted controller to catch up")
    # the restarted nodes keep working on the tail: a change after the catch-up reaches them
    assert run(create_with_config(b1.address, "after", 5)).error_code == 0
    wait_until(lambda: "after" in image_view(b0.address), 10, "a topic created on the restarted broker")
