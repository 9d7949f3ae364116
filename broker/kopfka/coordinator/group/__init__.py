"""The group coordinator (`coordinator.GroupCoordinator`): classic (JoinGroup/SyncGroup) and
KIP-848 consumer groups, committed offsets, all persisted in the compacted `__consumer_offsets`
topic and cached in memory. The package imports nothing by itself: a broker builds the
coordinator on first need (kopfka.server.coordinator_slots)."""
