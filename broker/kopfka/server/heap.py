"""The objects of a started broker leave the cyclic garbage collector's view (gc.freeze).

A full (generation 2) collection traverses every tracked object of the process: in a started
broker those are mostly its startup heap (modules, kio schema classes, configs, metadata), some
hundreds of thousands of objects, so each full collection blocked the event loop for 25-70 ms
(measured with gc.callbacks at 2,000 acks=all writes/s), and every write in flight waited for
it. Frozen once the broker runs, they are never traversed again; a full collection then covers
what was allocated since, a few ms. They are not freed by the collector either: startup objects
live as long as the process, and reference counting still frees those without cycles.

`kopfka serve` goes further and starts with the collector off (`pause_collection_for_startup`):
importing the broker builds ~75,000 objects, and each full collection on the way walked all
of them again. The freeze turns it back on.
"""

from __future__ import annotations

import gc

STARTUP_FREEZE_DELAY_S = 1.0
"""How long a started server runs before the freeze, so its first requests do not wait behind
the one collection over the startup heap."""


def pause_collection_for_startup() -> None:
    """No cyclic collection until `freeze_startup_heap` (called once the server has started)."""
    gc.disable()


def freeze_startup_heap() -> int:
    """Collect the startup garbage once, then freeze what survives and let the collector run
    again; returns how many objects the collector no longer walks."""
    gc.collect()
    before = gc.get_freeze_count()
    gc.freeze()
    gc.enable()
    return gc.get_freeze_count() - before
