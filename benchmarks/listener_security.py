"""Security benchmark (issue 17): TLS vs plaintext produce and fetch on one broker in one run,
what limits TLS fetch, and the SASL/SCRAM handshake time.

  (1) produce MiB/s, confluent-kafka acks=1, 64 KiB records, plaintext vs TLS listener; ratio
  (2) fetch MiB/s with raw Fetch requests (the client decodes nothing), plaintext (sendfile) vs
      TLS (pread + encrypt in the broker's event loop); ratio; the broker's CPU time per GiB
      served on each; and, as the ceiling measured in the same run, one core's OpenSSL
      encryption rate through Python's ssl module (memory BIOs, 1 MiB writes)
  (3) connection set-up p50/p99 (connect, secure, authenticate, then one ApiVersions): plaintext,
      TLS, SASL/PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (4096 and 8192 iterations), each a fresh
      connection with kopfka's client (SCRAM's PBKDF2 runs on the client, once per connection)

Usage: python benchmarks/listener_security.py [--mb 512] [--handshakes 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).parent))

from broker_core import _end_offset, produce, raw_fetch_bytes
from kopfka.client.connection import KafkaConnection
from kopfka.security.client import ClientSecurity
from kopfka_process import KopfkaProcess, free_port
from security.certs import PASSWORD, CertificateAuthority

MiB = 1 << 20
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


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
        await conn.request(18, 3, {"client_software_name": "bench", "client_software_version": "1"})
        times.append((time.perf_counter() - t0) * 1000)
        await conn.close()
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.99))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--handshakes", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    total = args.mb * MiB
    base = Path(tempfile.mkdtemp(prefix="kopfka-secbench-"))
    ca = CertificateAuthority()
    keystore = ca.issue("broker", server=True).write_p12(base / "broker.p12")
    ca_pem = ca.write_pem(base / "ca.pem")
    ports = {name: free_port() for name in ("plain", "tls", "sasl")}
    listeners = (
        f"PLAINTEXT://127.0.0.1:{ports['plain']},SSL://127.0.0.1:{ports['tls']},"
        f"SASL_PLAINTEXT://127.0.0.1:{ports['sasl']},"
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
        asyncio.run(
            _add_users(
                proc.bootstrap,
                [
                    ("bench", "SCRAM-SHA-256", 4096),
                    ("bench", "SCRAM-SHA-512", 4096),
                    ("bench8k", "SCRAM-SHA-512", 8192),
                ],
            )
        )

        tls_client = {"security.protocol": "ssl", "ssl.ca.location": str(ca_pem)}
        # (1) produce: a warm-up, then plaintext and TLS alternately, best of `--rounds` each
        plain_bs, tls_bs = f"127.0.0.1:{ports['plain']}", f"127.0.0.1:{ports['tls']}"
        produce(plain_bs, "warmup", min(total, 64 * MiB), record=64 * 1024)
        plain_mb = tls_mb = 0.0
        cpu = {"plain": 0.0, "tls": 0.0}
        for r in range(args.rounds):
            c0 = cpu_seconds(pid)
            plain_mb = max(plain_mb, produce(plain_bs, f"plain{r}", total, record=64 * 1024))
            c1 = cpu_seconds(pid)
            tls_mb = max(tls_mb, produce(tls_bs, f"tls{r}", total, record=64 * 1024, extra=tls_client))
            cpu["plain"] += c1 - c0
            cpu["tls"] += cpu_seconds(pid) - c1
        gib = args.rounds * total / (1 << 30)
        print(
            f"(1) produce acks=1, 64 KiB records: plaintext {plain_mb:7.1f} MiB/s, TLS {tls_mb:7.1f} MiB/s, "
            f"ratio {tls_mb / plain_mb:.2f}  (best of {args.rounds}); broker CPU s per GiB: "
            f"plaintext {cpu['plain'] / gib:.2f}, TLS {cpu['tls'] / gib:.2f}"
        )

        # (2) fetch the same topic both ways, alternately; broker and client CPU per GiB
        end = asyncio.run(_end_offset(proc.bootstrap, "plain0"))
        client_ctx = ssl.create_default_context(cafile=str(ca_pem))
        best: dict[str, tuple[float, float, float]] = {}
        for _ in range(args.rounds):
            for name, bs, tls in (("plaintext", plain_bs, None), ("TLS", tls_bs, client_ctx)):
                b0, c0 = cpu_seconds(pid), time.process_time()
                mbps, nbytes = raw_fetch_bytes(bs, "plain0", end, tls)
                gib = nbytes / (1 << 30)
                row = (mbps, (cpu_seconds(pid) - b0) / gib, (time.process_time() - c0) / gib)
                if row[0] > best.get(name, (0.0, 0.0, 0.0))[0]:
                    best[name] = row
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(*_pem_pair(base, ca))
        ceiling = openssl_ceiling(server_ctx, client_ctx, min(total, 512 * MiB))
        (fp, bp, cp), (ft, bt, ct) = best["plaintext"], best["TLS"]
        print(
            f"(2) fetch raw Fetch requests:       plaintext {fp:7.1f} MiB/s, TLS {ft:7.1f} MiB/s, ratio {ft / fp:.2f}"
        )
        print(
            f"    CPU s per GiB, broker / client: plaintext {bp:5.2f} / {cp:5.2f} (sendfile), "
            f"TLS {bt:5.2f} / {ct:5.2f} (pread + encrypt + write / decrypt)"
        )
        print(
            f"    ceiling, one core's TLS encryption (ssl.MemoryBIO, 1 MiB writes): {ceiling:7.1f} MiB/s "
            f"= {1024 / ceiling:.2f} s/GiB; TLS fetch reaches {ft / ceiling:.2f} of it"
        )

        # (3) connection set-up
        n = args.handshakes
        rows = [
            ("plaintext", f"127.0.0.1:{ports['plain']}", None),
            (
                "TLS (1.3)",
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


async def _add_users(bootstrap: str, creds: list[tuple[str, str, int]]) -> None:
    from kopfka.client.admin import Admin
    from kopfka.client.user_scram import alter_user_scram_credentials

    admin = await Admin.connect(bootstrap)
    try:
        for user, mech, iterations in creds:  # one request per credential (a user once per request)
            await alter_user_scram_credentials(admin, [(user, mech, "bench-pw", iterations)])
    finally:
        await admin.close()


def _pem_pair(base: Path, ca: CertificateAuthority) -> tuple[str, str]:
    issued = ca.issue("ceiling", server=True)
    cert, key = base / "ceiling.crt", base / "ceiling.key"
    cert.write_bytes(issued.chain_pem())
    key.write_bytes(issued.key_pem())
    return str(cert), str(key)


if __name__ == "__main__":
    main()
