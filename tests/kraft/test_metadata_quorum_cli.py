"""`kopfka metadata-quorum` against a real 3-controller quorum: describe --status/--replication
through a non-leader controller, add-controller --config for an observer controller (auto-join
off), remove-controller, and errors that exit non-zero with a message."""

from __future__ import annotations

import json
import re
from typing import Any

from cluster import Cluster, Node, describe_quorum, run, wait_until
from kopfka.log import meta_properties


def voters(c: Cluster) -> list[int]:
    p = run(describe_quorum(c.leader().address)).topics[0].partitions[0]
    return sorted(int(v.replica_id) for v in p.current_voters)


def test_describe_add_and_remove_controller(make_cluster: Any) -> None:
    c: Cluster = make_cluster(3, 1).start()
    tool = c.brokers[0]  # any node can run the CLI; it just needs the kopfka command
    leader = c.leader()
    non_leader = next(x for x in c.controllers if x is not leader)
    bootstrap = ("--bootstrap-controller", non_leader.address)

    res = tool.kopfka("metadata-quorum", *bootstrap, "describe", "--status")
    assert res.returncode == 0, res.stderr
    status = dict(re.findall(r"^(\w+):\s+(.*)$", res.stdout, re.M))
    assert int(status["LeaderId"]) == leader.node_id
    assert int(status["HighWatermark"]) > 0
    cur = json.loads(status["CurrentVoters"])
    assert sorted(v["id"] for v in cur) == [1000, 1001, 1002]
    by_id = {v["id"]: v for v in cur}
    assert by_id[leader.node_id]["endpoints"] == [f"CONTROLLER://{leader.address}"]
    assert by_id[non_leader.node_id]["directoryId"] == non_leader.directory_id
    assert [o["id"] for o in json.loads(status["CurrentObservers"])] == [0]

    res = tool.kopfka("metadata-quorum", *bootstrap, "describe", "--replication")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[0].split() == [
        "NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"
    ]
    rows = {int(r.split()[0]): r.split() for r in lines[1:]}
    assert rows[leader.node_id][-1] == "Leader"
    assert sorted(k for k, r in rows.items() if r[-1] == "Follower") == sorted(
        x.node_id for x in c.controllers if x is not leader
    )
    assert rows[0][-1] == "Observer"

    # a 4th controller, formatted without initial controllers and not auto-joining: an observer
    new = Node(c.root, 1003, "controller", "127.0.0.14", props=c.props)
    new.write_config({**c.quorum_props(), "controller.quorum.auto.join.enable": "false"})
    assert new.format(c.cluster_id, "--no-initial-controllers").returncode == 0
    c.controllers.append(new)
    new.start()
    new_dir = meta_properties.read(new.dir / "metadata").directory_id  # type: ignore[union-attr]

    def observed() -> bool:
        out = tool.kopfka("metadata-quorum", *bootstrap, "describe", "--replication").stdout
        return any(line.split()[:1] == ["1003"] and line.split()[-1] == "Observer" for line in out.splitlines())

    wait_until(observed, 20, "controller 1003 to fetch as an observer")
    assert voters(c) == [1000, 1001, 1002], "auto-join was disabled: 1003 must not have joined by itself"

    res = tool.kopfka("metadata-quorum", *bootstrap, "add-controller", "--config", str(new.config))
    assert res.returncode == 0, res.stderr
    assert f"Added controller 1003 with directory id {new_dir}" in res.stdout
    wait_until(lambda: voters(c) == [1000, 1001, 1002, 1003], 15, "1003 in the voter set")
    new.wait_ready(20)

    # adding it again is refused with a message
    res = tool.kopfka("metadata-quorum", *bootstrap, "add-controller", "--config", str(new.config))
    assert res.returncode != 0 and "DUPLICATE_VOTER" in res.stderr.upper(), res.stderr

    # a wrong directory id names no voter
    res = tool.kopfka(
        "metadata-quorum", *bootstrap, "remove-controller", "--controller-id", "1003",
        "--controller-directory-id", leader.directory_id,
    )
    assert res.returncode != 0 and "VOTER_NOT_FOUND" in res.stderr.upper(), res.stderr

    res = tool.kopfka(
        "metadata-quorum", *bootstrap, "remove-controller", "--controller-id", "1003",
        "--controller-directory-id", new_dir,
    )
    assert res.returncode == 0, res.stderr
    wait_until(lambda: voters(c) == [1000, 1001, 1002], 15, "1003 removed from the voter set")

    dead = ("--bootstrap-controller", "127.0.0.14:1", "--timeout", "2")
    res = tool.kopfka("metadata-quorum", *dead, "describe", "--status")
    assert res.returncode != 0 and "cannot describe the quorum" in res.stderr
