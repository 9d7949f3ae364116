"""Sans-IO security parts against published vectors and Kafka's own examples: SCRAM (RFC 7677),
PLAIN, ssl.principal.mapping.rules, JAAS parsing, and the clear errors bad listener security
configs give (the key named, never a password echoed)."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest
from certs import PASSWORD
from conftest import Pki
from kopfka.config.definitions import ConfigError
from kopfka.config.server_config import KafkaConfig
from kopfka.security import jaas, plain, scram
from kopfka.security.listeners import listener_security
from kopfka.security.principal import SslPrincipalMapper, certificate_dn


def test_scram_sha256_rfc7677_vector(monkeypatch: pytest.MonkeyPatch) -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = scram.credential_from_salted(
        "SCRAM-SHA-256", scram.salted_password("SCRAM-SHA-256", "pencil", salt, 4096), salt, 4096
    )
    monkeypatch.setattr(scram, "_nonce", lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    server = scram.ScramServer("SCRAM-SHA-256", lambda u: cred if u == "user" else None)
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.state == "complete" and server.authorization_id == "user"


@pytest.mark.parametrize("mechanism", sorted(scram.MECHANISMS))
def test_scram_wrong_password_and_unknown_user_fail_alike(mechanism: str) -> None:
    cred = scram.new_credential(mechanism, "right")
    outcomes = []
    for user, password in (("alice", "right"), ("alice", "wrong"), ("nobody", "right")):
        server = scram.ScramServer(mechanism, lambda u: cred if u == "alice" else None)
        client = scram.ScramClient(mechanism, user, password)
        first = server.evaluate(client.first())  # an unknown user still gets a salt and iterations
        assert b",s=" in first and first.endswith(b",i=4096")
        try:
            client.verify(server.evaluate(client.final(first)))
            outcomes.append("ok")
        except scram.ScramError as exc:
            outcomes.append(str(exc))
    assert outcomes == ["ok", "Invalid client credentials", "Invalid client credentials"]


def test_scram_unknown_user_salt_is_stable_per_server() -> None:
    """The made-up salt must not change between attempts, or probing would reveal unknown users."""
    server_secret = b"s" * 32
    salts = {
        scram.ScramServer("SCRAM-SHA-512", lambda u: None, secret=server_secret)
        .evaluate(b"n,,n=ghost,r=abc")
        .split(b",")[1]
        for _ in range(3)
    }
    assert len(salts) == 1


@pytest.mark.parametrize(
    "message",
    [b"", b"\xff\xfe", b"y,,n=u,r=x", b"n,,n=,r=x", b"n,,n=u=1,r=x", b"n,a=other,n=user,r=x", b"n,,n=u,r=a,b"],
)
def test_scram_malformed_first_messages(message: bytes) -> None:
    server = scram.ScramServer("SCRAM-SHA-256", lambda u: scram.new_credential("SCRAM-SHA-256", "p"))
    with pytest.raises(scram.ScramError):
        server.evaluate(message)
    assert server.state == "failed"
    with pytest.raises(scram.ScramError):
        server.evaluate(b"c=biws,r=x,p=AAAA")


def test_plain_tokens() -> None:
    users = {"alice": "secret"}
    assert plain.authenticate(plain.client_token("alice", "secret"), users) == "alice"
    assert plain.authenticate(b"alice\0alice\0secret", users) == "alice"
    for token, message in [
        (b"\0alice\0wrong", "Invalid username or password"),
        (b"\0bob\0secret", "Invalid username or password"),
        (b"\0\0x", "username not specified"),
        (b"\0alice\0", "password not specified"),
        (b"bob\0alice\0secret", "authorization id that is different"),
        (b"only-two\0parts", "expected 3 tokens"),
    ]:
        with pytest.raises(plain.PlainError, match=message):
            plain.authenticate(token, users)


def test_principal_mapping_rules_as_kafka() -> None:
    """The examples of Kafka's SslPrincipalMapperTest and its documentation."""
    rules = SslPrincipalMapper(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,"
        "DEFAULT"
    )
    assert rules.name("CN=kafka-server1,OU=ServiceUsers,O=Org,C=US") == "kafka-server1"
    assert rules.name("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Palo Alto,ST=CA,C=US") == "duke@javasoft"
    assert rules.name("cn=test.user,dc=example,dc=com") == "TEST.USER"
    assert SslPrincipalMapper("DEFAULT").name("CN=x,O=y") == "CN=x,O=y"
    assert SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?)$/$1@$3/").name("CN=a,OU=b") == "a@$3"  # no group 3: literal
    with pytest.raises(LookupError):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("O=only")
    for bad in ("RULE:^CN=(.*)$/$1/X", "NOTARULE"):
        with pytest.raises(ConfigError, match=r"ssl\.principal\.mapping\.rules"):
            SslPrincipalMapper(bad)


def test_certificate_dn_is_rfc2253_order(pki: Pki) -> None:
    from cryptography.hazmat.primitives import serialization

    der = pki.alice.cert.public_bytes(serialization.Encoding.DER)
    assert certificate_dn(der) == "CN=alice,OU=eng,O=kopfka,C=US"


def test_jaas_parsing() -> None:
    e = jaas.parse(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="p\\"w;d" user_admin="a" user_bob=b;'
    )
    assert e.options["password"] == 'p"w;d' and e.plain_users() == {"admin": "a", "bob": "b"}
    assert jaas.parse(jaas.client_jaas("SCRAM-SHA-512", "u", 'x"y')).options == {"username": "u", "password": 'x"y'}
    for bad in (
        "",
        "Module",
        "Module badflag;",
        'Module required a="b"',
        'M required a="b"; N required;',
        "M required a=;",
    ):
        with pytest.raises(ConfigError) as info:
            jaas.parse(bad)
        assert 'a="b"' not in str(info.value)


def test_credentials_never_show_in_a_repr() -> None:
    """A JAAS entry's options (passwords, user_* entries) and a client's password stay out of
    repr, so a log line or a traceback showing either object shows no secret."""
    from kopfka.security.client import ClientSecurity

    e = jaas.parse('org.apache.kafka.common.security.plain.PlainLoginModule required password="s3cr3t" user_x="pw2";')
    c = ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", "alice", "s3cr3t")
    for shown in (repr(e), repr(c), str(c), f"{e!r} {[c]}"):
        assert "s3cr3t" not in shown and "pw2" not in shown, shown
    assert "alice" in repr(c) and "PlainLoginModule" in repr(e)  # the rest still shows


def _cfg(**extra: str) -> KafkaConfig:
    raw = {
        "node.id": "1",
        "process.roles": "broker,controller",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "S://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map": "S:SSL,CONTROLLER:PLAINTEXT",
    }
    return KafkaConfig.from_properties({**raw, **extra})


@pytest.mark.parametrize(
    ("settings", "key", "text"),
    [
        ({}, "ssl.keystore.location", "needs a keystore"),
        ({"ssl.keystore.location": "/x.jks", "ssl.keystore.password": "p"}, "ssl.keystore.type", "keytool"),
        (
            {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "{p12}", "ssl.keystore.password": "bad"},
            "ssl.keystore.location",
            "password is wrong",
        ),
        (
            {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "{p12}"},
            "ssl.keystore.password",
            "needs its password",
        ),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "{pem}"}, "ssl.keystore.location", "ssl.key.password"),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "{pem}", "ssl.key.password": "nope"},
            "ssl.keystore.location",
            "wrong ssl.key.password",
        ),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "{pem}", "ssl.keystore.password": "x"},
            "ssl.keystore.password",
            "PEM",
        ),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent.pem"},
            "ssl.keystore.location",
            "cannot read",
        ),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "{ca}"}, "ssl.keystore.location", "no PEM private key"),
        ({"listener.name.s.ssl.client.auth": "sometimes"}, "listener.name.s.ssl.client.auth", "required"),
        ({"listener.security.protocol.map": "CONTROLLER:PLAINTEXT"}, "listeners", "listener S"),
        (
            {"listener.security.protocol.map": "S:TLS,CONTROLLER:PLAINTEXT"},
            "listener.security.protocol.map",
            "invalid security protocol 'TLS'",
        ),
    ],
)
def test_listener_config_errors_name_the_key(pki: Pki, settings: dict[str, str], key: str, text: str) -> None:
    paths = {"p12": str(pki.server_p12), "pem": str(pki.server_pem), "ca": str(pki.ca_pem)}
    resolved = {k: v.format(**paths) for k, v in settings.items()}
    with pytest.raises(ConfigError) as info:
        listener_security(_cfg(**resolved), "S")
    assert info.value.key == key and text in str(info.value)
    assert PASSWORD not in str(info.value) and "keypass" not in str(info.value)


@pytest.mark.parametrize(
    ("settings", "text"),
    [
        ({}, "GSSAPI"),  # Kafka's default mechanism, which kopfka does not offer
        ({"sasl.enabled.mechanisms": "PLAIN"}, "plain.sasl.jaas.config"),
        ({"sasl.enabled.mechanisms": "OAUTHBEARER"}, "OAUTHBEARER"),
    ],
)
def test_sasl_listener_config_errors(settings: dict[str, str], text: str) -> None:
    cfg = _cfg(**{"listener.security.protocol.map": "S:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT", **settings})
    with pytest.raises(ConfigError, match=text):
        listener_security(cfg, "S")


def test_listener_overrides_are_known_keys(pki: Pki) -> None:
    cfg = _cfg(
        **{
            "listener.name.s.ssl.keystore.type": "PEM",
            "listener.name.s.ssl.keystore.location": str(pki.server_pem),
            "listener.name.s.ssl.key.password": "keypass",
            "listener.name.s.scram-sha-512.sasl.jaas.config": "x required;",
            "listener.name.s.not.a.key": "1",
        }
    )
    assert cfg.unknown_keys == ["listener.name.s.not.a.key"]
    assert listener_security(cfg, "S").ssl_context is not None


def test_serve_refuses_a_bad_keystore_and_says_why(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kopfka.cli.main",
            "serve",
            "--data-dir",
            str(tmp_path / "d"),
            "--listen",
            "127.0.0.1:0",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:9093",
            "--override",
            "ssl.keystore.type=PKCS12",
            "--override",
            f"ssl.keystore.location={tmp_path / 'missing.p12'}",
            "--override",
            "ssl.keystore.password=secret-value",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert "ssl.keystore.location" in out.stderr and "missing.p12" in out.stderr
    assert "secret-value" not in out.stderr + out.stdout


def test_config_providers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kopfka.config.providers import resolve

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "pw").write_text("s3cret")
    (tmp_path / "p.properties").write_text("keystore.password=from-file\n")
    monkeypatch.setenv("KOPFKA_TEST_PW", "from-env")
    base = {
        "config.providers": "dir,file,env",
        "config.providers.dir.class": "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
        "config.providers.dir.param.allowed.paths": str(tmp_path / "d"),
        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
        "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
    }
    got = resolve(
        {
            **base,
            "a": f"${{dir:{tmp_path / 'd'}:pw}}",
            "b": f"x-${{file:{tmp_path / 'p.properties'}:keystore.password}}",
            "c": "${env:KOPFKA_TEST_PW}",
            "d": "${undeclared:x:y}",
        }
    )
    assert (got["a"], got["b"], got["c"], got["d"]) == ("s3cret", "x-from-file", "from-env", "${undeclared:x:y}")
    for value, text in [
        (f"${{dir:{tmp_path / 'd'}:missing}}", "no file missing"),
        (f"${{dir:{tmp_path}:p.properties}}", "outside config.providers.dir.param.allowed.paths"),
        (f"${{file:{tmp_path / 'p.properties'}:nope}}", "no key nope"),
        ("${env:KOPFKA_NOT_SET_ANYWHERE}", "is not set"),
    ]:
        with pytest.raises(ConfigError, match=text) as info:
            resolve({**base, "ssl.keystore.password": value})
        assert info.value.key == "ssl.keystore.password" and "s3cret" not in str(info.value)
    with pytest.raises(ConfigError, match="class"):
        resolve({"config.providers": "x", "config.providers.x.class": "com.example.Vault"})
