"""Finalized features as Kafka's tools and clients see them: `kafka-features describe/upgrade` and
the Java admin client's describeFeatures/updateFeatures against a kopfka formatted at an older
release (4.1, metadata.version 27), upgraded in place, and a refused downgrade."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from java_clients import JavaAdmin
from kafka_ref import run_tool
from kopfka.client.connection import KafkaConnection
from kopfka_process import KopfkaProcess, free_port

UNSUPPORTED_VERSION, COORDINATOR_NOT_AVAILABLE = 35, 15


def format_at(tmp_path: Path, release: str) -> tuple[Path, Path]:
    data = tmp_path / "data"
    props = tmp_path / "server.properties"
    ctl = free_port()  # the single voter's controller listener is bound: never a fixed port
    props.write_text(
        "node.id=1\nprocess.roles=broker,controller\ncontroller.listener.names=CONTROLLER\n"
        f"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:{ctl}\n"
        f"controller.quorum.voters=1@127.0.0.1:{ctl}\nlog.dirs={data}\noffsets.topic.replication.factor=1\n"
    )
    res = subprocess.run(
        [sys.executable, "-m", "kopfka.cli.main", "storage", "format", "-t", "MkU3OEVBNTcwNTJENDM2Qg",
         "-c", str(props), "--release-version", release],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return data, props


def describe_tool(bootstrap: str) -> dict[str, str]:
    out = run_tool("kafka-features", "--bootstrap-server", bootstrap, "describe").stdout
    line = next(x for x in out.splitlines() if x.startswith("Feature: metadata.version"))
    return dict(re.findall(r"(\w+): (\S+)", line))


@pytest.mark.timeout(240)
def test_describe_upgrade_and_refused_downgrade(tmp_path: Path, java_admin: JavaAdmin) -> None:
    data, props = format_at(tmp_path, "4.1")
    k = KopfkaProcess(data, config_file=props).start()
    try:
        mv = describe_tool(k.bootstrap)
        assert (mv["SupportedMinVersion"], mv["SupportedMaxVersion"], mv["FinalizedVersionLevel"]) == (
            "3.3-IV3", "4.3-IV0", "4.1-IV1",
        )  # fmt: skip
        before, validated, after_validate = java_admin.run(
            k.bootstrap,
            ["describe-features"],
            ["update-features", "metadata.version=30", "UPGRADE", "validate"],
            ["describe-features"],
        )
        assert before["ok"]["supported"]["metadata.version"] == [7, 30]
        assert before["ok"]["finalized"]["metadata.version"] == [27, 27]
        assert validated["ok"] == "updated" and after_validate["ok"]["finalized"]["metadata.version"] == [27, 27]

        run_tool("kafka-features", "--bootstrap-server", k.bootstrap, "upgrade", "--metadata", "4.3")
        assert describe_tool(k.bootstrap)["FinalizedVersionLevel"] == "4.3-IV0"
        downgrade, too_new = java_admin.run(
            k.bootstrap,
            ["update-features", "metadata.version=29", "SAFE_DOWNGRADE"],
            ["update-features", "metadata.version=31", "UPGRADE"],
        )
        assert downgrade["error"] == "InvalidUpdateVersionException"
        assert "might delete metadata information" in downgrade["message"]
        assert too_new["error"] == "InvalidUpdateVersionException" and "7-30" in too_new["message"]
        k.restart()
        assert describe_tool(k.bootstrap)["FinalizedVersionLevel"] == "4.3-IV0"  # it is in the metadata log
    finally:
        k.kill()


def heartbeat_error(bootstrap: str) -> int:
    async def call() -> int:
        conn = await KafkaConnection.open(bootstrap)
        try:
            body = {
                "group_id": "gv",
                "member_id": "m-1",
                "member_epoch": 0,
                "rebalance_timeout": 30000,
                "subscribed_topic_names": ["gv-topic"],
                "topic_partitions": [],
            }
            await conn.request(10, 4, {"key_type": 0, "coordinator_keys": ["gv"]})  # as clients do first
            return int((await conn.request(68, 1, body)).error_code)
        finally:
            await conn.close()

    return asyncio.run(call())


@pytest.mark.timeout(180)
def test_group_version_gates_the_consumer_protocol(tmp_path: Path) -> None:
    """Formatted at 3.9 (group.version 0) the consumer rebalance protocol is refused, as Kafka
    refuses it; upgrading metadata.version to 4.0 and group.version to 1 turns it on."""
    data, props = format_at(tmp_path, "3.9")
    k = KopfkaProcess(data, config_file=props).start()
    try:
        assert heartbeat_error(k.bootstrap) == UNSUPPORTED_VERSION
        res = run_tool(
            "kafka-features", "--bootstrap-server", k.bootstrap, "upgrade", "--feature", "group.version=1",
            check=False,
        )  # fmt: skip
        assert res.returncode != 0 and "requires metadata.version 22" in res.stdout + res.stderr
        run_tool(
            "kafka-features", "--bootstrap-server", k.bootstrap, "upgrade", "--metadata", "4.0",
            "--feature", "group.version=1",
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while (code := heartbeat_error(k.bootstrap)) == COORDINATOR_NOT_AVAILABLE and time.monotonic() < deadline:
            time.sleep(0.2)  # __consumer_offsets is being created for the first group
        assert code == 0
    finally:
        k.kill()
