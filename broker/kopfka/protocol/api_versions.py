"""The API keys and version ranges this broker answers on client listeners.

Ranges are those Kafka 4.x accepts (kio is generated from Kafka 4.2's schemas, so it holds
exactly these), limited to what kopfka implements. ApiVersions advertises this table; any
other (key, version) is answered with UNSUPPORTED_VERSION.
"""

from __future__ import annotations

API_VERSIONS_KEY = 18

# api_key -> (min_version, max_version)
BROKER_APIS: dict[int, tuple[int, int]] = {
    0: (3, 13),  # Produce
    1: (4, 18),  # Fetch
    2: (1, 11),  # ListOffsets
    3: (0, 13),  # Metadata
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId (v6, KIP-939, is unstable in Kafka 4.3: not advertised)
    23: (2, 4),  # OffsetForLeaderEpoch
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    37: (0, 3),  # CreatePartitions
    44: (0, 1),  # IncrementalAlterConfigs
    60: (0, 2),  # DescribeCluster
}

# APIs added by later subsystems register here at import time (groups, quotas, raft, ...).
EXTRA_APIS: dict[int, tuple[int, int]] = {}


def supported_apis() -> dict[int, tuple[int, int]]:
    return {**BROKER_APIS, **EXTRA_APIS}


# Kafka 4.x advertises Produce from v0 although it accepts only v3+ (KAFKA-18659): librdkafka
# before 2.10 (kcat's) otherwise decides the broker cannot take compressed batches and sends them
# uncompressed. A v0-v2 request is still refused (no schema: the connection is closed).
ADVERTISED_MIN_VERSIONS = {0: 0}


def advertised_apis() -> dict[int, tuple[int, int]]:
    """What ApiVersions lists: the served ranges, with Kafka's advertised-only lower bounds."""
    return {k: (min(lo, ADVERTISED_MIN_VERSIONS.get(k, lo)), hi) for k, (lo, hi) in sorted(supported_apis().items())}


def is_supported(api_key: int, api_version: int) -> bool:
    rng = BROKER_APIS.get(api_key) or EXTRA_APIS.get(api_key)
    return rng is not None and rng[0] <= api_version <= rng[1]


# APIs answered only on the controller listener (KRaft quorum and controller RPCs).
CONTROLLER_APIS: dict[int, tuple[int, int]] = {
    1: (17, 17),  # Fetch (raft fetch of __cluster_metadata)
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics (forwarded by brokers)
    20: (1, 6),  # DeleteTopics
    33: (0, 2),  # AlterConfigs
    37: (0, 3),  # CreatePartitions
    44: (0, 1),  # IncrementalAlterConfigs
    49: (0, 1),  # AlterClientQuotas (forwarded by brokers)
    52: (0, 2),  # Vote
    53: (0, 1),  # BeginQuorumEpoch
    54: (0, 1),  # EndQuorumEpoch
    55: (0, 2),  # DescribeQuorum
    57: (0, 2),  # UpdateFeatures (forwarded by brokers)
    59: (0, 1),  # FetchSnapshot
    62: (0, 4),  # BrokerRegistration
    63: (0, 2),  # BrokerHeartbeat
    64: (0, 0),  # UnregisterBroker
    67: (0, 0),  # AllocateProducerIds
    73: (0, 0),  # AssignReplicasToDirs
    80: (0, 1),  # AddRaftVoter
    81: (0, 0),  # RemoveRaftVoter
}
