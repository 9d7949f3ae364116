"""Finalized features as Kafka's tools and clients see them: `kafka-features describe/upgrade` and
the Java admin client's describeFeatures/updateFeatures against a kopfka formatted at an older
release (4.1, metadata.version 27), upgraded in place, and a refused downgrade."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from java_clients import JavaAdmin
from kafka_ref import run_tool
from kopfka_process import KopfkaProcess


def format_at(tmp_path: Path, release: str) -> tuple[Path, Path]:
    data = tmp_path / "data"
    props = tmp_path / "server.properties"
    props.write_text(
        "node.id=1\nprocess.roles=broker,controller\ncontroller.listener.names=CONTROLLER\n"
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n"
        f"controller.quorum.voters=1@127.0.0.1:9093\nlog.dirs={data}\noffsets.topic.replication.factor=1\n"
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
