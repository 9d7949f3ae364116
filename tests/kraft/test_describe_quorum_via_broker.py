"""DescribeQuorum (and UpdateFeatures, RemoveRaftVoter) sent to a broker are forwarded to the active controller, as
Kafka's brokers do: Kafka's `kafka-metadata-quorum --bootstrap-server` and the Java admin
client's describeMetadataQuorum/updateFeatures work against a broker (a KRaft cluster, and the
embedded default)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from java_clients import JavaAdmin
from kafka_ref import run_tool
from kopfka_process import KopfkaProcess


def status(bootstrap: str) -> dict[str, str]:
    res = run_tool("kafka-metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--status")
    return dict(re.findall(r"^(\w+):\s+(.*)$", res.stdout, re.M))


def test_kafka_metadata_quorum_through_a_broker(make_cluster: Any, java_admin: JavaAdmin) -> None:
    c = make_cluster(1, 1).start()
    (controller,), (broker,) = c.controllers, c.brokers
    st = status(broker.address)
    assert int(st["LeaderId"]) == controller.node_id and int(st["HighWatermark"]) > 0
    (voter,) = json.loads(st["CurrentVoters"])
    assert voter["id"] == controller.node_id and voter["endpoints"] == [f"CONTROLLER://{controller.address}"]
    assert [o["id"] for o in json.loads(st["CurrentObservers"])] == [broker.node_id]
    res = run_tool("kafka-metadata-quorum", "--bootstrap-server", broker.address, "describe", "--replication")
    rows = {int(line.split()[0]): line.split()[-1] for line in res.stdout.strip().splitlines()[1:]}
    assert rows == {controller.node_id: "Leader", broker.node_id: "Observer"}
    q, features, upgrade, downgrade, last_voter, no_voter = java_admin.run(
        broker.address,
        ["describe-quorum"],
        ["describe-features"],
        ["update-features", "metadata.version=30", "UPGRADE", "validate"],
        ["update-features", "metadata.version=29", "SAFE_DOWNGRADE"],
        ["remove-raft-voter", str(controller.node_id), controller.directory_id],
        ["remove-raft-voter", "1234", controller.directory_id],
    )
    assert q["ok"]["leader_id"] == controller.node_id and [v[0] for v in q["ok"]["voters"]] == [controller.node_id]
    # UpdateFeatures is forwarded the same way; the controller's answer comes back to the client
    assert features["ok"]["finalized"]["metadata.version"] == [30, 30]
    assert upgrade["ok"] == "updated"
    assert downgrade["error"] == "InvalidUpdateVersionException" and "delete metadata" in downgrade["message"]
    # RemoveRaftVoter reaches the quorum leader through the broker, and its refusals come back
    assert last_voter["error"] == "InvalidRequestException" and "last voter" in last_voter["message"]
    assert no_voter["error"] == "VoterNotFoundException"


def test_kafka_metadata_quorum_against_the_embedded_default(tmp_path: Path) -> None:
    k = KopfkaProcess(tmp_path / "data").start()
    try:
        st = status(k.bootstrap)
        assert int(st["LeaderId"]) == 1 and int(st["HighWatermark"]) > 0
        assert [v["id"] for v in json.loads(st["CurrentVoters"])] == [1]
        assert json.loads(st["CurrentObservers"]) == []
        # UnregisterBroker is served too: the controller's refusal reaches kafka-cluster
        res = run_tool("kafka-cluster", "unregister", "--bootstrap-server", k.bootstrap, "--id", "77", check=False)
        assert res.returncode != 0 and "BrokerIdNotRegisteredException" in res.stdout + res.stderr
    finally:
        k.kill()
