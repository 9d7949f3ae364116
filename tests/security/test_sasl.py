"""SASL listeners: PLAIN (users from the listener's JAAS config) and SCRAM-SHA-256/512 (credentials
in the metadata log, managed with `kopfka configs --entity-type users`), over SASL_PLAINTEXT and
SASL_SSL, with the four clients; bad passwords and unknown users refused alike after the failure
delay; nothing but the SASL exchange before authentication; SaslHandshake v0 raw tokens;
re-authentication (KIP-368); fuzzed SASL frames never hurt the broker."""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
import sys
import time

import pytest
from clients import CLIENTS, Security, roundtrip
from conftest import PASSWORD, REAUTH_MS, SCRAM_USERS, Pki, SaslPorts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kopfka.client.connection import KafkaConnection
from kopfka.protocol.errors import ErrorCode
from kopfka.security import plain, scram
from kopfka.security.client import AuthenticationError, ClientSecurity
from kopfka_process import KopfkaProcess

FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism"


def _skip_kcat(client: str) -> None:
    import shutil

    if client == "kcat" and shutil.which("kcat") is None:
        pytest.skip("kcat not installed")


@pytest.mark.parametrize("client", CLIENTS)
def test_sasl_plain_roundtrip(client: str, sasl_broker: tuple[KopfkaProcess, SaslPorts]) -> None:
    _skip_kcat(client)
    _, ports = sasl_broker
    sec = Security("SASL_PLAINTEXT", mechanism="PLAIN", username="alice", password="alice-pw")
    roundtrip(client, f"127.0.0.1:{ports.sasl}", f"plain-{client}", sec)


@pytest.mark.parametrize("client", CLIENTS)
def test_scram_sha512_over_sasl_ssl_roundtrip(
    client: str, sasl_broker: tuple[KopfkaProcess, SaslPorts], pki: Pki
) -> None:
    _skip_kcat(client)
    _, ports = sasl_broker
    sec = Security("SASL_SSL", ca=str(pki.ca_pem), mechanism="SCRAM-SHA-512", username="bob", password="bob-pw")
    roundtrip(client, f"127.0.0.1:{ports.sasl_ssl}", f"scram-{client}", sec)


def test_scram_sha256_kopfka_client(sasl_broker: tuple[KopfkaProcess, SaslPorts]) -> None:
    """kopfka's own client (the broker's inter-broker client) speaks SCRAM and verifies the server."""
    _, ports = sasl_broker

    async def main() -> None:
        sec = ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", "carol", "carol-pw")
        conn = await KafkaConnection.open(f"127.0.0.1:{ports.sasl}", security=sec)
        try:
            resp = await conn.request(
                3,
                12,
                {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
            )
            assert resp.brokers and resp.brokers[0].port == ports.sasl  # advertised on this listener
        finally:
            await conn.close()

    asyncio.run(main())


async def _closed(conn: KafkaConnection) -> bool:
    """Did the broker close the connection (a request gets no answer)?"""
    try:
        await conn.request(18, 0, {}, timeout=5)
        return False
    except (ConnectionError, asyncio.IncompleteReadError, OSError):
        return True


async def _exchange(port: int, mechanism: str, tokens: list[bytes]) -> tuple[list[object], float, bool]:
    """Raw SaslHandshake v1 + SaslAuthenticate v2 tokens; (responses, seconds, closed afterwards)."""
    conn = await KafkaConnection.open(f"127.0.0.1:{port}")
    try:
        hs = await conn.request(17, 1, {"mechanism": mechanism})
        out: list[object] = [hs]
        t0 = time.monotonic()
        for tok in tokens:
            resp = await conn.request(36, 2, {"auth_bytes": tok})
            out.append(resp)
            if resp.error_code != 0:
                break
        took = time.monotonic() - t0
        return out, took, await _closed(conn)
    finally:
        await conn.close()


async def _scram_attempt(port: int, mechanism: str, user: str, password: str) -> tuple[object, float, bool]:
    client = scram.ScramClient(mechanism, user, password)
    conn = await KafkaConnection.open(f"127.0.0.1:{port}")
    try:
        await conn.request(17, 1, {"mechanism": mechanism})
        first = await conn.request(36, 2, {"auth_bytes": client.first()})
        assert first.error_code == 0, "an unknown user must not be told apart at the first message"
        t0 = time.monotonic()
        final = await conn.request(36, 2, {"auth_bytes": client.final(bytes(first.auth_bytes))})
        took = time.monotonic() - t0
        return final, took, await _closed(conn)
    finally:
        await conn.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_wrong_password_and_unknown_user_look_the_same(
    mechanism: str, sasl_broker: tuple[KopfkaProcess, SaslPorts]
) -> None:
    proc, ports = sasl_broker
    wrong, took_w, closed_w = asyncio.run(_scram_attempt(ports.sasl, mechanism, "bob", "not-bobs"))
    unknown, took_u, closed_u = asyncio.run(_scram_attempt(ports.sasl, mechanism, "mallory", "x"))
    for resp in (wrong, unknown):
        assert ErrorCode(resp.error_code) == ErrorCode.sasl_authentication_failed  # type: ignore[attr-defined]
        assert resp.error_message == f"{FAILED} {mechanism}"  # type: ignore[attr-defined]
        assert resp.auth_bytes == b""  # type: ignore[attr-defined]
    assert closed_w and closed_u
    assert took_w >= 0.09 and took_u >= 0.09, "connection.failed.authentication.delay.ms (100) not applied"
    ok, _, closed = asyncio.run(_scram_attempt(ports.sasl, mechanism, "bob", "bob-pw"))
    assert ok.error_code == 0 and not closed  # type: ignore[attr-defined]
    assert proc.alive


def test_plain_bad_credentials(sasl_broker: tuple[KopfkaProcess, SaslPorts]) -> None:
    _, ports = sasl_broker
    for user, password in (("alice", "nope"), ("nobody", "alice-pw")):
        out, took, closed = asyncio.run(_exchange(ports.sasl, "PLAIN", [plain.client_token(user, password)]))
        resp = out[-1]
        assert ErrorCode(resp.error_code) == ErrorCode.sasl_authentication_failed  # type: ignore[attr-defined]
        assert resp.error_message == "Authentication failed: Invalid username or password"  # type: ignore[attr-defined]
        assert closed and took >= 0.09


def test_clients_report_a_bad_password(sasl_broker: tuple[KopfkaProcess, SaslPorts]) -> None:
    """librdkafka surfaces the broker's message as an authentication error."""
    from confluent_kafka import KafkaError, Producer

    _, ports = sasl_broker
    errors: list[KafkaError] = []
    p = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{ports.sasl}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "bob",
            "sasl.password": "wrong",
            "error_cb": errors.append,
        }
    )
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert f"{FAILED} SCRAM-SHA-512" in errors[0].str()


def test_tools_use_command_config(sasl_broker: tuple[KopfkaProcess, SaslPorts], pki: Pki, tmp_path) -> None:
    _, ports = sasl_broker
    good = tmp_path / "admin.properties"
    good.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca_pem}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="bob" password="bob-pw";\n'
    )
    cmd = [sys.executable, "-m", "kopfka.cli.main", "topics", "--bootstrap-server", f"127.0.0.1:{ports.sasl_ssl}"]
    out = subprocess.run(
        [*cmd, "--command-config", str(good), "--create", "--topic", "via-cli"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    bad = tmp_path / "bad.properties"
    bad.write_text(good.read_text().replace('password="bob-pw"', 'password="nope"'))
    out = subprocess.run([*cmd, "--command-config", str(bad), "--list"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and f"{FAILED} SCRAM-SHA-512" in out.stderr
    assert "nope" not in out.stderr


def test_only_the_sasl_exchange_before_authentication(sasl_broker: tuple[KopfkaProcess, SaslPorts]) -> None:
    _, ports = sasl_broker

    async def main() -> None:
        # a Metadata request before authenticating: closed without an answer
        conn = await KafkaConnection.open(f"127.0.0.1:{ports.sasl}")
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
            await conn.request(
                3,
                12,
                {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
                timeout=5,
            )
        await conn.close()
        # a mechanism the listener does not enable: the answer lists the enabled ones, then close
        out, _, closed = await _exchange(ports.reauth, "SCRAM-SHA-256", [])
        hs = out[0]
        assert ErrorCode(hs.error_code) == ErrorCode.unsupported_sasl_mechanism  # type: ignore[attr-defined]
        assert list(hs.mechanisms) == ["SCRAM-SHA-512"] and closed  # type: ignore[attr-defined]
        # SaslAuthenticate on a listener without SASL: ILLEGAL_SASL_STATE, connection kept
        conn = await KafkaConnection.open(f"127.0.0.1:{ports.plaintext}")
        resp = await conn.request(36, 2, {"auth_bytes": b"x"})
        assert ErrorCode(resp.error_code) == ErrorCode.illegal_sasl_state
        assert (
            await conn.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        ).error_code == 0
        await conn.close()

    asyncio.run(main())


def test_sasl_handshake_v0_raw_tokens(sasl_broker: tuple[KopfkaProcess, SaslPorts]) -> None:
    """After SaslHandshake v0 the tokens travel without Kafka headers (pre-KIP-152 clients)."""
    _, ports = sasl_broker
    with socket.create_connection(("127.0.0.1", ports.sasl), timeout=10) as s:
        s.sendall(_frame(struct.pack(">hhih", 17, 0, 1, 1) + b"c" + _kstr(b"PLAIN")))
        assert _read_frame(s)[:6] == struct.pack(">ih", 1, 0)
        s.sendall(_frame(plain.client_token("alice", "alice-pw")))
        assert _read_frame(s) == b""  # PLAIN's empty server token, size-prefixed
        s.sendall(_frame(struct.pack(">hhih", 18, 0, 2, 1) + b"c"))  # now a normal request
        assert _read_frame(s)[:6] == struct.pack(">ih", 2, 0)
    with socket.create_connection(("127.0.0.1", ports.sasl), timeout=10) as s:
        s.sendall(_frame(struct.pack(">hhih", 17, 0, 1, 1) + b"c" + _kstr(b"PLAIN")))
        _read_frame(s)
        s.sendall(_frame(plain.client_token("alice", "wrong")))
        assert s.recv(10) == b""  # v0 has no error response: the broker closes


def _kstr(b: bytes) -> bytes:
    return struct.pack(">h", len(b)) + b


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _read_frame(s: socket.socket) -> bytes:
    size = struct.unpack(">i", _recv(s, 4))[0]
    return _recv(s, size)


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def test_reauthentication(sasl_broker: tuple[KopfkaProcess, SaslPorts]) -> None:
    """connections.max.reauth.ms: the session lifetime is sent to the client; kopfka's client
    re-authenticates on the same connection and keeps working; a client that does not is
    disconnected at its next request after expiry; a re-authentication may not change the
    principal or the mechanism."""
    _, ports = sasl_broker
    addr = f"127.0.0.1:{ports.reauth}"
    metadata = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}

    async def main() -> None:
        bob = ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", "bob", "bob-pw")
        conn = await KafkaConnection.open(addr, security=bob)
        assert conn._reauth_at is not None
        deadline = time.monotonic() + 3.5 * REAUTH_MS / 1000
        n = 0
        while time.monotonic() < deadline:  # spans two re-authentications on one connection
            await conn.request(3, 12, metadata)
            n += 1
            await asyncio.sleep(0.1)
        assert n > 20
        await conn.close()

        # a client that never re-authenticates is cut off after the lifetime
        conn = await KafkaConnection.open(addr, security=bob)
        conn._reauth_at = None
        await conn.request(3, 12, metadata)
        await asyncio.sleep(REAUTH_MS / 1000 + 0.3)
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
            await conn.request(3, 12, metadata, timeout=5)
        await conn.close()

        # re-authenticating as someone else is refused
        conn = await KafkaConnection.open(addr, security=bob)
        conn.security = ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", "carol", "carol-pw")
        with pytest.raises(AuthenticationError, match="Cannot change principals"):
            await conn._authenticate()
        await conn.close()

    asyncio.run(main())


def test_librdkafka_reauthenticates(sasl_broker: tuple[KopfkaProcess, SaslPorts]) -> None:
    """A confluent-kafka consumer outlives several session lifetimes without errors (KIP-368)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    _, ports = sasl_broker
    conf = {
        "bootstrap.servers": f"127.0.0.1:{ports.reauth}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "carol",
        "sasl.password": "carol-pw",
    }
    errors: list[str] = []
    c = Consumer({**conf, "group.id": "reauth", "error_cb": lambda e: errors.append(e.str())})
    p = Producer({**conf, "error_cb": lambda e: errors.append(e.str())})
    c.assign([TopicPartition("reauth", 0, 0)])
    got = 0
    deadline = time.monotonic() + 3 * REAUTH_MS / 1000
    i = 0
    while time.monotonic() < deadline or got < i:
        if time.monotonic() < deadline:
            p.produce("reauth", b"%d" % i)
            p.flush(5)
            i += 1
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got += 1
        assert time.monotonic() < deadline + 20, f"consumed {got} of {i}"
    c.close()
    assert got == i and i > 5
    assert not errors, errors


def test_credentials_lifecycle(sasl_broker: tuple[KopfkaProcess, SaslPorts]) -> None:
    """Describe shows mechanisms and iterations only; deleting a mechanism's credential stops
    that mechanism at once and leaves the other; bad alterations get Kafka's error codes."""
    proc, ports = sasl_broker
    cli = [
        sys.executable,
        "-m",
        "kopfka.cli.main",
        "configs",
        "--bootstrap-server",
        proc.bootstrap,
        "--entity-type",
        "users",
    ]
    out = subprocess.run([*cli, "--describe"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for user in SCRAM_USERS:
        assert (
            f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=4096,"
            f"SCRAM-SHA-512=iterations=8192" in out.stdout
        )
    assert "pw" not in out.stdout

    subprocess.run(
        [*cli, "--entity-name", "dave", "--alter", "--add-config", "SCRAM-SHA-256=[password=d1]"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    sha256 = ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", "dave", "d1")
    asyncio.run(_open_close(f"127.0.0.1:{ports.sasl}", sha256))
    subprocess.run(
        [*cli, "--entity-name", "dave", "--alter", "--add-config", "SCRAM-SHA-256=[password=d2]"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    with pytest.raises(AuthenticationError):  # the old password stopped working
        asyncio.run(_open_close(f"127.0.0.1:{ports.sasl}", sha256))
    subprocess.run(
        [*cli, "--entity-name", "dave", "--alter", "--delete-config", "SCRAM-SHA-256"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    with pytest.raises(AuthenticationError):
        asyncio.run(
            _open_close(
                f"127.0.0.1:{ports.sasl}", ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", "dave", "d2")
            )
        )

    async def raw(body: dict) -> list[tuple[str, ErrorCode]]:
        conn = await KafkaConnection.open(proc.bootstrap)
        try:
            resp = await conn.request(51, 0, body)
            return sorted((r.user, ErrorCode(r.error_code)) for r in resp.results)
        finally:
            await conn.close()

    up = {"name": "erin", "mechanism": 2, "iterations": 4096, "salt": b"s" * 16, "salted_password": b"p" * 64}
    assert asyncio.run(raw({"deletions": [], "upsertions": [{**up, "iterations": 100}]})) == [
        ("erin", ErrorCode.unacceptable_credential)
    ]
    assert asyncio.run(raw({"deletions": [], "upsertions": [{**up, "iterations": 20000}]})) == [
        ("erin", ErrorCode.unacceptable_credential)
    ]
    assert asyncio.run(raw({"deletions": [], "upsertions": [{**up, "mechanism": 9}]})) == [
        ("erin", ErrorCode.unsupported_sasl_mechanism)
    ]
    assert asyncio.run(raw({"deletions": [], "upsertions": [{**up, "name": ""}]})) == [
        ("", ErrorCode.unacceptable_credential)
    ]
    assert asyncio.run(raw({"deletions": [], "upsertions": [up, {**up, "mechanism": 1}]})) == [
        ("erin", ErrorCode.duplicate_resource)
    ]
    assert asyncio.run(raw({"deletions": [{"name": "nobody", "mechanism": 1}], "upsertions": []})) == [
        ("nobody", ErrorCode.resource_not_found)
    ]
    out = subprocess.run(
        [*cli, "--entity-name", "erin", "--alter", "--add-config", "SCRAM-SHA-512=[iterations=9]"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1 and "password is required" in out.stderr


async def _open_close(addr: str, sec: ClientSecurity) -> None:
    conn = await KafkaConnection.open(addr, security=sec)
    await conn.close()


# ---------------------------------------------------------------- fuzzed SASL frames

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _auth_frames(mechanism: bytes, tokens: list[bytes], version: int) -> bytes:
    out = _frame(struct.pack(">hhih", 17, 1, 1, 1) + b"f" + _kstr(mechanism))
    for i, tok in enumerate(tokens):
        if version == 0:
            body = struct.pack(">i", len(tok)) + tok
            header = struct.pack(">hhih", 36, 0, 2 + i, 1) + b"f"
        else:  # flexible v2: compact bytes and tagged fields
            n = len(tok) + 1
            varint = b""
            while n >= 0x80:
                varint += bytes([n & 0x7F | 0x80])
                n >>= 7
            body = varint + bytes([n]) + tok + b"\0"
            header = struct.pack(">hhih", 36, 2, 2 + i, 1) + b"f" + b"\0"
        out += _frame(header + body)
    return out


def _blast(port: int, data: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass
        except (ConnectionResetError, BrokenPipeError, TimeoutError):
            pass


@FUZZ
@given(
    mechanism=st.sampled_from([b"PLAIN", b"SCRAM-SHA-256", b"SCRAM-SHA-512", b"GSSAPI", b""]) | st.binary(max_size=30),
    tokens=st.lists(
        st.binary(max_size=300)
        | st.builds(lambda u, r: b"n,,n=" + u + b",r=" + r, st.binary(max_size=20), st.binary(max_size=40))
        | st.builds(
            lambda a, b, c: a + b"\0" + b + b"\0" + c,
            st.binary(max_size=20),
            st.binary(max_size=20),
            st.binary(max_size=20),
        ),
        max_size=3,
    ),
    version=st.sampled_from([0, 1, 2]),
)
def test_fuzzed_sasl_tokens(
    sasl_broker: tuple[KopfkaProcess, SaslPorts], mechanism: bytes, tokens: list[bytes], version: int
) -> None:
    _, ports = sasl_broker
    _blast(ports.sasl, _auth_frames(mechanism, tokens, version))


@FUZZ
@given(data=st.binary(min_size=1, max_size=600), prefix=st.sampled_from(["none", "handshake", "handshake-v0"]))
def test_fuzzed_sasl_frames(sasl_broker: tuple[KopfkaProcess, SaslPorts], data: bytes, prefix: str) -> None:
    """Garbage where the SASL exchange expects frames: before the handshake, after it (Kafka
    framed), and after a v0 handshake (raw tokens)."""
    _, ports = sasl_broker
    head = b""
    if prefix == "handshake":
        head = _frame(struct.pack(">hhih", 17, 1, 1, 1) + b"f" + _kstr(b"SCRAM-SHA-512"))
    elif prefix == "handshake-v0":
        head = _frame(struct.pack(">hhih", 17, 0, 1, 1) + b"f" + _kstr(b"SCRAM-SHA-512"))
    _blast(ports.sasl, head + _frame(data) + data)


def test_sasl_edge_frames_and_broker_health_after_fuzzing(sasl_broker: tuple[KopfkaProcess, SaslPorts]) -> None:
    """Frames above sasl.server.max.receive.size (512 KiB) before authentication close the
    connection at once; afterwards real clients authenticate and the log holds no unhandled error."""
    proc, ports = sasl_broker
    with socket.create_connection(("127.0.0.1", ports.sasl), timeout=10) as s:
        s.sendall(struct.pack(">i", 600 * 1024) + b"\0" * 1024)
        t0 = time.monotonic()
        assert s.recv(10) == b""
        assert time.monotonic() - t0 < 5
    for _ in range(3):  # half-open SASL connections do not block others
        socket.create_connection(("127.0.0.1", ports.sasl), timeout=10).close()
    assert proc.alive
    roundtrip(
        "confluent",
        f"127.0.0.1:{ports.sasl}",
        "after-fuzz",
        Security("SASL_PLAINTEXT", mechanism="SCRAM-SHA-512", username="bob", password="bob-pw"),
        n=5,
    )
    log = proc.log_text()
    assert "Traceback" not in log and "Unexpected error" not in log, log[-3000:]
    assert PASSWORD not in log and "bob-pw" not in log


def test_user_quotas_apply_to_the_authenticated_principal(sasl_broker: tuple[KopfkaProcess, SaslPorts]) -> None:
    """A producer_byte_rate for user=carol throttles carol's SASL connection and not bob's."""
    from clients import produce_body

    proc, ports = sasl_broker
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kopfka.cli.main",
            "quotas",
            "--bootstrap-server",
            proc.bootstrap,
            "--alter",
            "--user",
            "carol",
            "--add",
            "producer_byte_rate=20000",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr

    async def throttle(user: str) -> float:
        sec = ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", user, SCRAM_USERS[user])
        conn = await KafkaConnection.open(f"127.0.0.1:{ports.sasl}", security=sec)
        try:
            worst = 0.0
            for _ in range(4):  # 4 x 100 KB against 20 KB/s
                resp = await conn.request(0, 9, produce_body(f"quota-{user}", b"x" * 100_000))
                worst = max(worst, resp.throttle_time.total_seconds())
            return worst
        finally:
            await conn.close()

    assert asyncio.run(throttle("carol")) > 0
    assert asyncio.run(throttle("bob")) == 0


def test_credentials_survive_a_restart(sasl_broker: tuple[KopfkaProcess, SaslPorts]) -> None:
    """SCRAM credentials are metadata-log records: replayed after a restart (last in this module)."""
    proc, ports = sasl_broker
    proc.restart()
    sec = ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", "bob", "bob-pw")
    asyncio.run(_open_close(f"127.0.0.1:{ports.sasl}", sec))
    with pytest.raises(AuthenticationError):
        asyncio.run(
            _open_close(
                f"127.0.0.1:{ports.sasl}", ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", "bob", "wrong")
            )
        )
