"""Feature levels (KIP-584): what this binary supports, and what a finalized metadata.version allows.

One table serves every place that speaks of versions: ApiVersions (broker and controller
listeners), broker registration, `kopfka storage format` (bootstrap.checkpoint) and
UpdateFeatures. The gates mirror Kafka's MetadataVersion: a capability whose records older
nodes cannot read is used only once the finalized metadata.version has it.
"""

from __future__ import annotations

from collections.abc import Mapping

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"  # 1: the consumer rebalance protocol (KIP-848)
ELIGIBLE_LEADER_REPLICAS_VERSION = "eligible.leader.replicas.version"  # 1: ELR (KIP-966)
SHARE_VERSION = "share.version"  # 1: share groups (KIP-932)

MINIMUM_METADATA_VERSION = 7  # 3.3-IV3: the first level with FeatureLevelRecord in the log
LATEST_PRODUCTION_METADATA_VERSION = 30  # 4.3-IV0

# release -> its last metadata.version level (what `--release-version 4.2` formats with)
RELEASE_LEVELS = {
    "3.3": 7,
    "3.4": 8,
    "3.5": 11,
    "3.6": 14,
    "3.7": 19,
    "3.8": 20,
    "3.9": 21,
    "4.0": 25,
    "4.1": 27,
    "4.2": 29,
    "4.3": 30,
}
LATEST_PRODUCTION_RELEASE = "4.3"

# feature -> (min, max) level this binary supports; others (transaction.version, group.version,
# share.version, ...) are added by the subsystems that implement them
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (MINIMUM_METADATA_VERSION, LATEST_PRODUCTION_METADATA_VERSION),
    KRAFT_VERSION: (0, 1),
    TRANSACTION_VERSION: (0, 2),  # 1: flexible __transaction_state values, 2: KIP-890 epoch bump per transaction
    GROUP_VERSION: (0, 1),
    SHARE_VERSION: (0, 1),
    ELIGIBLE_LEADER_REPLICAS_VERSION: (0, 1),
}

# feature -> (the metadata.version from which a new cluster gets it by default, that level):
# transaction.version 2 from 4.0-IV2 on, as Kafka's TransactionVersion.TV_2; group.version 1 from
# 4.0-IV0 on, as Kafka's GroupVersion.GV_1; share.version 1 from 4.2-IV0 on, as Kafka's ShareVersion.SV_1;
# eligible.leader.replicas.version 1 from 4.1-IV0 on (Kafka 4.3's `kafka-features version-mapping`)
RELEASE_DEFAULT_FEATURES = {
    TRANSACTION_VERSION: (24, 2),
    GROUP_VERSION: (22, 1),
    SHARE_VERSION: (28, 1),
    ELIGIBLE_LEADER_REPLICAS_VERSION: (26, 1),
}

# (feature, level) -> the metadata.version it needs (Kafka's feature dependencies; ELR 1 needs
# 4.0-IV1, as Kafka 4.3's `kafka-features feature-dependencies` reports)
FEATURE_LEVEL_MIN_METADATA = {(GROUP_VERSION, 1): 22, (ELIGIBLE_LEADER_REPLICAS_VERSION, 1): 23}


def default_feature_levels(metadata_level: int) -> dict[str, int]:
    """The non-metadata feature levels `kopfka storage format` finalizes for a release."""
    return {name: level for name, (since, level) in RELEASE_DEFAULT_FEATURES.items() if metadata_level >= since}


# levels that changed the metadata records (Kafka's didMetadataChange): a downgrade across one
# could drop information, so it is refused
_METADATA_CHANGED_AT = frozenset({7, 8, 11, 13, 14, 15, 17, 23, 30})


def metadata_level_for(release: str) -> int:
    short = ".".join(release.split("-")[0].split(".")[:2])
    if short not in RELEASE_LEVELS:
        raise ValueError(f"Unknown release version {release!r}; known: {', '.join(RELEASE_LEVELS)}")
    return RELEASE_LEVELS[short]


def supported_features_list() -> list[dict[str, int | str]]:
    """SUPPORTED_FEATURES as ApiVersions' supported_features entries."""
    return [{"name": n, "min_version": lo, "max_version": hi} for n, (lo, hi) in SUPPORTED_FEATURES.items()]


def reason_not_supported(level: int, supported: tuple[int, int] | None, who: str) -> str | None:
    """Why `who`, supporting `supported` (None: not at all), cannot run at `level` (Kafka's wording)."""
    lo, hi = supported if supported is not None else (0, 0)
    if lo <= level <= hi:
        return None
    if hi == 0:
        return f"{who} does not support this feature."
    return f"{who} only supports versions {lo}-{hi}"


def downgrade_loses_metadata(current: int, target: int) -> bool:
    """Kafka's MetadataVersion.checkIfMetadataChanged: a level in (target, current] changed the records."""
    lo, hi = sorted((current, target))
    return any(lo < level <= hi for level in _METADATA_CHANGED_AT)


def missing_dependency(name: str, level: int, features: Mapping[str, int]) -> str | None:
    """Why `name` cannot be finalized at `level` given the other (finalized or proposed) levels, or
    None. For metadata.version: no finalized feature level may need a higher one."""
    if name == METADATA_VERSION:
        for (other, other_level), needs in sorted(FEATURE_LEVEL_MIN_METADATA.items()):
            if features.get(other, 0) == other_level and level < needs:
                return f"{other} {other_level} requires {METADATA_VERSION} {needs} or higher."
        return None
    required = FEATURE_LEVEL_MIN_METADATA.get((name, level))
    have = features.get(METADATA_VERSION, 0)
    if required is not None and have < required:
        return f"{name} {level} requires {METADATA_VERSION} {required} or higher (finalized: {have})."
    return None


def share_groups_supported(features: Mapping[str, int]) -> bool:
    """The share-group APIs are served from share.version 1 on (Kafka's isShareGroupProtocolEnabled);
    below it they answer UNSUPPORTED_VERSION."""
    return features.get(SHARE_VERSION, 0) >= 1


def elr_enabled(features: Mapping[str, int]) -> bool:
    """Eligible leader replicas (KIP-966) are kept and used in elections (Kafka's isElrFeatureEnabled)."""
    return features.get(ELIGIBLE_LEADER_REPLICAS_VERSION, 0) >= 1


def consumer_rebalance_protocol_supported(features: Mapping[str, int]) -> bool:
    """ConsumerGroupHeartbeat/Describe are served from group.version 1 on (KIP-848)."""
    return features.get(GROUP_VERSION, 0) >= 1


# --- capabilities gated by the finalized metadata.version (Kafka's MetadataVersion.is*Supported) --
def metadata_transactions_supported(features: Mapping[str, int]) -> bool:
    """Begin/EndTransactionRecord around records that must apply atomically (3.6-IV1)."""
    return features.get(METADATA_VERSION, 0) >= 13


def directory_assignment_supported(features: Mapping[str, int]) -> bool:
    """Log dir ids in registrations and partitions, AssignReplicasToDirs (JBOD, 3.7-IV2)."""
    return features.get(METADATA_VERSION, 0) >= 17


def cordoned_log_dirs_supported(features: Mapping[str, int]) -> bool:
    """cordoned.log.dirs reported to and recorded by the controller (4.3-IV0)."""
    return features.get(METADATA_VERSION, 0) >= 30
