"""The share coordinator (KIP-932): share-partition state in `__share_group_state`."""

from kopfka.coordinator.share.coordinator import SHARE_STATE_TOPIC, ShareCoordinator

__all__ = ["SHARE_STATE_TOPIC", "ShareCoordinator"]
