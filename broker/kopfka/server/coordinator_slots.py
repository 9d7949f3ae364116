"""The broker's coordinators (groups, transactions, share groups), built on first need.

Importing and building the group, transaction and share coordinators took 60-100 ms of every
broker start, and a broker has nothing for them to do until their internal topic exists
(`__consumer_offsets`, `__transaction_state`, `__share_group_state`, created on first use) or a
client asks for them. Each one's place among the metadata publishers is taken by a slot, in the
order Kafka's broker installs them. The slot builds its coordinator when a request reaches for
it (BrokerServices.group_coordinator, ...) or when the metadata image first holds its internal
topic (a broker restarted on a cluster that already has groups loads them as before). A built
coordinator is first told the whole image, as a publisher installed late is, then every later
delta through the slot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kopfka.metadata.image import MetadataDelta, MetadataImage
from kopfka.metadata.loader import MetadataLoader, whole_image_delta


class CoordinatorSlot:
    """A metadata publisher standing in for one coordinator until it is built."""

    def __init__(
        self, name: str, build: Callable[[], Any], loader: MetadataLoader | None, internal_topic: str | None = None
    ) -> None:
        self.name = name
        self._build = build
        self._loader = loader
        self._internal_topic = internal_topic
        self.built: Any = None

    def get(self) -> Any:
        """The coordinator, built now if it was not yet (brought up to date with the image)."""
        if self.built is None:
            image = self._loader.image if self._loader is not None else MetadataImage()
            self._make(image)
        return self.built

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        if self.built is not None:
            self.built.on_metadata_update(delta, image)
        elif self._internal_topic is not None and self._internal_topic in image.topics_by_name:
            self._make(image)  # the whole image includes this delta

    def _make(self, image: MetadataImage) -> None:
        self.built = self._build()  # before the catch-up: it may reach for its own slot
        if hasattr(self.built, "on_metadata_update") and not image.is_empty():
            try:
                self.built.on_metadata_update(whole_image_delta(image), image)
            except BaseException:
                self.built = None
                raise


class CoordinatorProperty:
    """An attribute of BrokerServices that is the coordinator of the slot of the same name,
    built on this first access; None where the broker has no such slot."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, services: Any, owner: type | None = None) -> Any:
        if services is None:
            return self
        slot = services.slots.get(self.name)
        return slot.get() if slot is not None else None


__all__ = ["CoordinatorProperty", "CoordinatorSlot"]
