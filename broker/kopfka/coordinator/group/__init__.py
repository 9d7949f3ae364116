"""The group coordinator: classic (JoinGroup/SyncGroup) and KIP-848 consumer groups, committed
offsets, all persisted in the compacted `__consumer_offsets` topic and cached in memory."""

from kopfka.coordinator.group.coordinator import GroupCoordinator

__all__ = ["GroupCoordinator"]
