"""How many pods each StatefulSet may have right now: pure, from the spec, what runs, and what
the scaler (scale/scaler.py) has made safe.

A StatefulSet removes its highest ordinals when it shrinks, and a removed broker would take its
replicas with it, a removed controller its vote. So a shrink is rendered only once the scaler
says the nodes going away are out of the voter set (`votersShrinkTo`) and hold no replica
(`dataShrinkTo`) — both, for a combined pool — and voters grow one at a time (`votersGrowTo`:
each new voter joins before the next is created).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

VOTER_ROLES = ("controller", "combined")
BROKER_ROLES = ("broker", "combined")


def rendered_replicas(role: str, wanted: int, running: int | None, scale: Mapping[str, Any]) -> int:
    """The replica count to render for a role's StatefulSet (`running`: its spec.replicas now,
    None before it exists; `scale`: status.scale.<role>)."""
    if running is None:
        return wanted
    if wanted < running:
        allowed = running
        gates = [
            key for key, roles in (("votersShrinkTo", VOTER_ROLES), ("dataShrinkTo", BROKER_ROLES)) if role in roles
        ]
        values = [scale.get(key) for key in gates]
        if all(isinstance(v, int) for v in values):
            allowed = max(int(v) for v in values)  # type: ignore[arg-type]
        return max(wanted, min(allowed, running))
    if wanted > running and role in VOTER_ROLES:
        grow = scale.get("votersGrowTo")
        return min(wanted, grow) if isinstance(grow, int) and grow > running else running
    return wanted
