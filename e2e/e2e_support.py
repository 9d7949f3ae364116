"""Shared helpers of the e2e tests (kept out of conftest.py so tests can import them)."""

from __future__ import annotations

import pathlib
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[1]


def run(
    *args: str, timeout: float = 600, check: bool = True, **kw: object
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), capture_output=True, text=True, timeout=timeout, check=check, **kw
    )  # type: ignore[call-overload]
