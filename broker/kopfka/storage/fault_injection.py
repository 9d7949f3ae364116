"""Test-only crash points: `KOPFKA_CRASH_POINT=<name>[:<n>]` makes the process `os._exit`
at the n-th (default first) time it reaches the named point.

The crash-safety tests kill the broker between the steps of the cleaner's swap and of
retention to prove that recovery completes or rolls back every step. Unset (production),
`crash_point` is one global lookup and a comparison.
"""

from __future__ import annotations

import logging
import os

CRASH_EXIT_CODE = 86

_spec = os.environ.get("KOPFKA_CRASH_POINT", "")
_name, _, _count = _spec.partition(":")
_remaining = int(_count) if _count.isdigit() else 1


def crash_point(name: str) -> None:
    """Exit at once (no flush, no cleanup: like a power cut) if this point is armed."""
    global _remaining
    if _name and name == _name:
        _remaining -= 1
        if _remaining <= 0:
            logging.getLogger(__name__).warning("crash point %s reached: exiting", name)
            for h in logging.getLogger().handlers:
                h.flush()
            os._exit(CRASH_EXIT_CODE)
