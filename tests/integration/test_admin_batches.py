"""The admin client's many-per-request calls (the operator's Topic/Quota batches) against a real
`kopfka serve`: one request each, and each item's own outcome with Kafka's error message."""

from __future__ import annotations

from typing import Any

import pytest
from kopfka.client.admin import Admin, AdminError, CreatedTopic, NewTopic, TopicInfo
from kopfka.client.quotas import alter_client_quotas_many, describe_client_quotas
from kopfka.protocol.errors import ErrorCode
from quotas.quota_helpers import admin_call

TOPIC = 2
SET, DELETE = 0, 1


def test_topic_batches_report_each_item(kopfka_shared: Any) -> None:
    async def scenario(admin: Admin) -> None:
        created = await admin.create_topics(
            [
                NewTopic("ab-ok", 3, 1, {"retention.ms": "1000"}),
                NewTopic("ab-bad-key", 1, 1, {"no.such.key": "1"}),
                NewTopic("ab-bad-value", 1, 1, {"retention.ms": "soon"}),
                NewTopic("ab-defaults"),
            ]
        )
        ok = created["ab-ok"]
        assert isinstance(ok, CreatedTopic) and (ok.partitions, ok.replication_factor) == (3, 1)
        assert isinstance(created["ab-defaults"], CreatedTopic)  # the broker's num.partitions
        bad = created["ab-bad-key"]
        assert isinstance(bad, AdminError) and bad.code == ErrorCode.invalid_config
        assert "Unknown topic config name: no.such.key" in str(bad)
        assert "Invalid value 'soon' for configuration retention.ms" in str(created["ab-bad-value"])
        again = (await admin.create_topics([NewTopic("ab-ok", 3, 1)]))["ab-ok"]
        assert isinstance(again, AdminError) and again.code == ErrorCode.topic_already_exists

        found = await admin.describe_topics(["ab-ok", "ab-missing"])
        assert isinstance(found["ab-ok"], TopicInfo) and len(found["ab-ok"].partitions) == 3
        missing = found["ab-missing"]
        assert isinstance(missing, AdminError) and missing.code == ErrorCode.unknown_topic_or_partition

        configs = await admin.describe_config_entries([(TOPIC, "ab-ok"), (TOPIC, "ab-missing")])
        entries = configs[(TOPIC, "ab-ok")]
        assert not isinstance(entries, AdminError)
        assert [(e.name, e.value) for e in entries if e.source == 1] == [("retention.ms", "1000")]
        assert isinstance(configs[(TOPIC, "ab-missing")], AdminError)
        assert (await admin.describe_configs_many([(TOPIC, "ab-ok")], ["retention.ms"])) == {
            (TOPIC, "ab-ok"): {"retention.ms": "1000"}
        }
        with pytest.raises(AdminError):
            await admin.describe_configs_many([(TOPIC, "ab-missing")])

        altered = await admin.incremental_alter_configs_many(
            {
                (TOPIC, "ab-ok"): [("retention.ms", DELETE, None), ("cleanup.policy", SET, "compact")],
                (TOPIC, "ab-defaults"): [("retention.ms", SET, "x"), ("cleanup.policy", SET, "compact")],
            }
        )
        assert altered[(TOPIC, "ab-ok")] is None
        assert altered[(TOPIC, "ab-defaults")] is not None  # refused whole: cleanup.policy not set either
        overrides = await admin.describe_configs_many([(TOPIC, "ab-ok"), (TOPIC, "ab-defaults")], ["cleanup.policy"])
        assert overrides[(TOPIC, "ab-ok")]["cleanup.policy"] == "compact"
        assert overrides[(TOPIC, "ab-defaults")]["cleanup.policy"] == "delete"

        grown = await admin.create_partitions_many({"ab-ok": 5, "ab-defaults": 1})
        assert grown["ab-ok"] is None
        refused = grown["ab-defaults"]
        assert isinstance(refused, AdminError) and refused.code == ErrorCode.invalid_partitions
        checked = await admin.create_partitions_many({"ab-ok": 2}, validate_only=True)
        assert "5 partition(s); 2 would not be an increase" in str(checked["ab-ok"])
        assert await admin.list_partition_reassignments() == {}

        assert ok.topic_id is not None
        deleted = await admin.delete_topics(names=["ab-defaults", "ab-nothing"], ids=[ok.topic_id])
        assert deleted[ok.topic_id] is None and deleted["ab-defaults"] is None
        nothing = deleted["ab-nothing"]
        assert isinstance(nothing, AdminError) and nothing.code == ErrorCode.unknown_topic_or_partition
        assert all(isinstance(v, AdminError) for v in (await admin.describe_topics(["ab-ok", "ab-defaults"])).values())

    admin_call(kopfka_shared.bootstrap, scenario)


def test_client_quota_batch_reports_each_entity(kopfka_shared: Any) -> None:
    async def scenario(admin: Admin) -> None:
        results = await alter_client_quotas_many(
            admin,
            [
                ([("user", "ab-alice")], {"producer_byte_rate": 1000}, []),
                ([("ip", "not-an-ip")], {"connection_creation_rate": 1}, []),
                ([("user", "ab-alice"), ("client-id", None)], {"consumer_byte_rate": 2000}, []),
            ],
        )
        assert results[0] is None and results[2] is None
        assert results[1] is not None and "not-an-ip is not a valid IP address" in str(results[1])
        quotas = {tuple(sorted(e)): v for e, v in await describe_client_quotas(admin)}
        assert quotas[(("user", "ab-alice"),)] == {"producer_byte_rate": 1000.0}
        assert quotas[(("client-id", None), ("user", "ab-alice"))] == {"consumer_byte_rate": 2000.0}
        removed = await alter_client_quotas_many(admin, [([("user", "ab-alice")], {}, ["producer_byte_rate"])])
        assert removed == [None]
        quotas = {tuple(sorted(e)): v for e, v in await describe_client_quotas(admin)}
        assert (("user", "ab-alice"),) not in quotas

    admin_call(kopfka_shared.bootstrap, scenario)
