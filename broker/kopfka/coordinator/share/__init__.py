"""The share coordinator (KIP-932, `coordinator.ShareCoordinator`): share-partition state in
`__share_group_state`. The package imports nothing by itself: a broker builds the coordinator on
first need (kopfka.server.coordinator_slots)."""
