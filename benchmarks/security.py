"""Security benchmark (issue 17): TLS vs plaintext produce and fetch on one broker in one run,
what limits TLS fetch, and the SASL/SCRAM handshake time.

  (1) produce MiB/s, confluent-kafka acks=1, 64 KiB records, plaintext vs TLS listener; ratio
  (2) fetch MiB/s with raw Fetch requests (the client decodes nothing), plaintext (sendfile) vs
      TLS (pread + encrypt in the broker's event loop); ratio; the broker's CPU time per GiB
      served on each; and, as the ceiling measured in the same run, one core's OpenSSL
      encryption rate through Python's ssl module (memory BIOs, 1 MiB writes)
  (3) connection set-up p50/p99: TCP + ApiVersions, TLS handshake, SASL/PLAIN, SCRAM-SHA-256 and
      SCRAM-SHA-512 (4096 and 8192 iterations), each a fresh connection with kopfka's client

Usage: python benchmarks/security.py [--mb 512] [--handshakes 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).parent))

from broker_core import _fetch_request_v12, _records_start_v12, produce
from kopfka.client.connection import KafkaConnection
from kopfka.protocol.records import iter_batches
from kopfka.security.client import ClientSecurity
from kopfka_process import KopfkaProcess, free_port
from security.certs import PASSWORD, CertificateAuthority

MiB = 1 << 20
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def raw_fetch(host: str, port: int, topic: str, end: int, ctx: ssl.SSLContext | None) -> tuple[float, int]:
    """Fetch v12 in a loop, parsing only batch headers; (MiB/s, bytes)."""
    s: socket.socket = socket.create_connection((host, port))
    if ctx is not None:
        s = ctx.wrap_socket(s, server_hostname=host)
    buf = bytearray(80 * MiB)
    view = memoryview(buf)
    offset = got = 0
    corr = 100
    t0 = time.perf_counter()
    while offset < end:
        corr += 1
        s.sendall(_fetch_request_v12(topic, offset, corr))
        n = 0
        while n < 4:
            n += s.recv_into(view[n:4])
        size = struct.unpack_from(">i", buf, 0)[0]
        n = 0
        while n < size:
            r = s.recv_into(view[n:size])
            if not r:
                raise ConnectionError("closed")
            n += r
        got += size + 4
        last = None
        for h in iter_batches(view[_records_start_v12(buf) : size], verify_crc=False, allow_partial_tail=True):
            last = h
        if last is None:
            break
        offset = last.next_offset
    dt = time.perf_counter() - t0
    s.close()
    return got / dt / MiB, got


def openssl_ceiling(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, total: int) -> float:
    """One core encrypting (server side) 1 MiB application writes through ssl memory BIOs; the
    client side decrypts and is timed apart, so this is the encryption rate alone."""
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    for _ in range(10):  # handshake
        for side in (client, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        c_in.write(s_out.read())
        s_in.write(c_out.read())
    chunk = os.urandom(MiB)
    spent = 0.0
    for _ in range(total // MiB):
        t0 = time.perf_counter()
        server.write(chunk)
        spent += time.perf_counter() - t0
        c_in.write(s_out.read())
        while True:
            try:
                if not client.read(4 * MiB):
                    break
            except ssl.SSLWantReadError:
                break
    return total / spent / MiB


async def connect_times(addr: str, sec: ClientSecurity | None, n: int) -> tuple[float, float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        conn = await KafkaConnection.open(addr, security=sec)
        if sec is None or not sec.mechanism:
            await conn.request(18, 3, {"client_software_name": "bench", "client_software_version": "1"})
        times.append((time.perf_counter() - t0) * 1000)
        await conn.close()
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.99))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--handshakes", type=int, default=100)
    args = ap.parse_args()
    total = args.mb * MiB
    base = Path(tempfile.mkdtemp(prefix="kopfka-secbench-"))
    ca = CertificateAuthority()
    keystore = ca.issue("broker", server=True).write_p12(base / "broker.p12")
    ca_pem = ca.write_pem(base / "ca.pem")
    ports = {name: free_port() for name in ("plain", "tls", "sasl", "sasl_ssl")}
    listeners = (
        f"PLAINTEXT://127.0.0.1:{ports['plain']},SSL://127.0.0.1:{ports['tls']},"
        f"SASL_PLAINTEXT://127.0.0.1:{ports['sasl']},SASL_SSL://127.0.0.1:{ports['sasl_ssl']},"
        "CONTROLLER://127.0.0.1:9093"
    )
    proc = KopfkaProcess(
        base / "data",
        port=ports["plain"],
        overrides={
            "listeners": listeners,
            "advertised.listeners": listeners.rsplit(",", 1)[0],
            "message.max.bytes": str(2 * MiB),
            "num.partitions": "1",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(keystore),
            "ssl.keystore.password": PASSWORD,
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": "org.apache.kafka.common.security.plain."
            'PlainLoginModule required user_bench="bench-pw";',
        },
    ).start()
    pid = proc.proc.pid if proc.proc else 0
    try:
        for mech, iters in (("SCRAM-SHA-256", 4096), ("SCRAM-SHA-512", 4096)):
            cfg = f"{mech}=[iterations={iters},password=bench-pw]"
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "kopfka.cli.main",
                    "configs",
                    "--bootstrap-server",
                    proc.bootstrap,
                    "--entity-type",
                    "users",
                    "--entity-name",
                    "bench",
                    "--alter",
                    "--add-config",
                    cfg,
                ],
                check=True,
                capture_output=True,
            )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "kopfka.cli.main",
                "configs",
                "--bootstrap-server",
                proc.bootstrap,
                "--entity-type",
                "users",
                "--entity-name",
                "bench8k",
                "--alter",
                "--add-config",
                "SCRAM-SHA-512=[iterations=8192,password=bench-pw]",
            ],
            check=True,
            capture_output=True,
        )
        tls_client = {"security.protocol": "ssl", "ssl.ca.location": str(ca_pem)}

        # (1) produce
        plain_mb = produce(f"127.0.0.1:{ports['plain']}", "plain", total, record=64 * 1024)
        tls_mb = produce(f"127.0.0.1:{ports['tls']}", "tls", total, record=64 * 1024, extra=tls_client)
        print(
            f"(1) produce acks=1, 64 KiB records: plaintext {plain_mb:7.1f} MiB/s, TLS {tls_mb:7.1f} MiB/s, "
            f"ratio {tls_mb / plain_mb:.2f}"
        )

        # (2) fetch the same topic both ways
        end = asyncio.run(_end_offset(proc.bootstrap, "plain"))
        cpu0 = cpu_seconds(pid)
        fplain, bytes_plain = raw_fetch("127.0.0.1", ports["plain"], "plain", end, None)
        cpu1 = cpu_seconds(pid)
        client_ctx = ssl.create_default_context(cafile=str(ca_pem))
        ftls, bytes_tls = raw_fetch("127.0.0.1", ports["tls"], "plain", end, client_ctx)
        cpu2 = cpu_seconds(pid)
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(*_pem_pair(base, ca))
        ceiling = openssl_ceiling(server_ctx, client_ctx, min(total, 512 * MiB))
        per_gib_plain = (cpu1 - cpu0) / (bytes_plain / (1 << 30))
        per_gib_tls = (cpu2 - cpu1) / (bytes_tls / (1 << 30))
        print(
            f"(2) fetch raw Fetch requests:       plaintext {fplain:7.1f} MiB/s, TLS {ftls:7.1f} MiB/s, "
            f"ratio {ftls / fplain:.2f}"
        )
        print(
            f"    broker CPU per GiB served:      plaintext {per_gib_plain:5.2f} s (sendfile), "
            f"TLS {per_gib_tls:5.2f} s (pread + encrypt + write)"
        )
        print(
            f"    ceiling, one core's TLS encryption (ssl.MemoryBIO, 1 MiB writes): {ceiling:7.1f} MiB/s; "
            f"TLS fetch reaches {ftls / ceiling:.2f} of it"
        )

        # (3) connection set-up
        n = args.handshakes
        rows = [
            ("TCP + ApiVersions", f"127.0.0.1:{ports['plain']}", None),
            (
                "TLS handshake",
                f"127.0.0.1:{ports['tls']}",
                ClientSecurity(
                    "SSL",
                    ClientSecurity.from_properties(
                        {
                            "security.protocol": "SSL",
                            "ssl.truststore.type": "PEM",
                            "ssl.truststore.location": str(ca_pem),
                        }
                    ).ssl_context,
                ),
            ),
            (
                "SASL/PLAIN",
                f"127.0.0.1:{ports['sasl']}",
                ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "bench", "bench-pw"),
            ),
            (
                "SCRAM-SHA-256 (4096 it.)",
                f"127.0.0.1:{ports['sasl']}",
                ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", "bench", "bench-pw"),
            ),
            (
                "SCRAM-SHA-512 (4096 it.)",
                f"127.0.0.1:{ports['sasl']}",
                ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", "bench", "bench-pw"),
            ),
            (
                "SCRAM-SHA-512 (8192 it.)",
                f"127.0.0.1:{ports['sasl']}",
                ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", "bench8k", "bench-pw"),
            ),
        ]
        print(f"(3) connection set-up, {n} fresh connections each (p50 / p99 ms):")
        for label, addr, sec in rows:
            p50, p99 = asyncio.run(connect_times(addr, sec, n))
            print(f"    {label:26s} {p50:6.2f} / {p99:6.2f}")
    finally:
        proc.kill()


def _pem_pair(base: Path, ca: CertificateAuthority) -> tuple[str, str]:
    issued = ca.issue("ceiling", server=True)
    cert, key = base / "ceiling.crt", base / "ceiling.key"
    cert.write_bytes(issued.chain_pem())
    key.write_bytes(issued.key_pem())
    return str(cert), str(key)


async def _end_offset(bootstrap: str, topic: str) -> int:
    from kopfka.client.admin import Admin

    admin = await Admin.connect(bootstrap)
    try:
        return (await admin.list_offsets(topic, [0], -1))[0][0]
    finally:
        await admin.close()


if __name__ == "__main__":
    main()
