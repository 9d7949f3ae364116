"""The embedded default answers real clients: kcat metadata, produce and consume."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from kopfka_process import KopfkaProcess


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (the test command installs it)")
def test_kcat_produce_consume(kopfka: KopfkaProcess) -> None:
    subprocess.run(
        ["kcat", "-b", kopfka.bootstrap, "-P", "-t", "smoke", "-K", ":"],
        input=b"a:1\nb:2\nc:3\n",
        check=True,
        timeout=30,
    )
    out = subprocess.run(
        ["kcat", "-b", kopfka.bootstrap, "-C", "-t", "smoke", "-o", "beginning", "-e", "-f", "%k=%s@%o\n"],
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout.decode()
    assert out.splitlines() == ["a=1@0", "b=2@1", "c=3@2"]


def test_sigterm_is_a_clean_shutdown(kopfka: KopfkaProcess) -> None:
    assert kopfka.stop() == 0
    log = kopfka.log_text()
    assert "PENDING_CONTROLLED_SHUTDOWN" in log and "shut down completed" in log
    assert (kopfka.data_dir / ".kafka_cleanshutdown").exists() or any(kopfka.data_dir.glob("*cleanshutdown*"))
