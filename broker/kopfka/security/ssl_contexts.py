"""Python SSLContexts from Kafka's ssl.* keys (server side per listener, client side for the
broker's own clients and kopfka's tools).

Keystores and truststores are PEM (a file, or the inline `ssl.keystore.key` /
`ssl.keystore.certificate.chain` / `ssl.truststore.certificates` values) or PKCS12. JKS is a
Java format with no Python reader: it is refused with the conversion command. The key and
chain are loaded with `cryptography` (so a wrong password or a file that is not a keystore is
a clear error naming the key) and handed to OpenSSL through a private temporary file holding
the key encrypted under a one-time password — a decrypted key never touches the disk.
"""

from __future__ import annotations

import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from kopfka.config.definitions import ConfigError

Getter = Callable[[str], Any]  # key -> typed value (listener overrides already applied)

_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_JKS_HINT = (
    "JKS is a Java keystore format kopfka cannot read: convert it with "
    "`keytool -importkeystore -srckeystore X.jks -destkeystore X.p12 -deststoretype PKCS12` "
    "and set the type to PKCS12, or use PEM"
)
CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


@dataclass
class KeyMaterial:
    key: Any  # a cryptography private key
    chain: list[x509.Certificate]


def _read(path: str, key: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(key, path, f"cannot read: {exc.strerror or exc}") from None


def _pem_certs(data: bytes, key: str, where: str) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        certs = []
    if not certs:
        raise ConfigError(key, where, "no PEM certificate found")
    return certs


_PEM_KEY = re.compile(rb"-----BEGIN ((?:[A-Z]+ )*PRIVATE KEY)-----.*?-----END \1-----", re.S)


def _pem_key(data: bytes, password: str | None, key: str, where: str) -> Any:
    m = _PEM_KEY.search(data)
    if m is None:
        raise ConfigError(key, where, "no PEM private key found")
    try:
        return serialization.load_pem_private_key(m.group(0), password.encode() if password else None)
    except TypeError:
        raise ConfigError(key, where, "the private key is encrypted: set ssl.key.password") from None
    except ValueError:
        raise ConfigError(key, where, "cannot decrypt or parse the private key (wrong ssl.key.password?)") from None


def load_keystore(get: Getter) -> KeyMaterial | None:
    """The private key and certificate chain this side presents, or None when none is configured."""
    ktype = str(get("ssl.keystore.type") or "JKS").upper()
    location = get("ssl.keystore.location")
    password = get("ssl.keystore.password")
    key_password = get("ssl.key.password")
    inline_key = get("ssl.keystore.key")
    inline_chain = get("ssl.keystore.certificate.chain")
    if inline_key is not None or inline_chain is not None:
        if ktype != "PEM":
            raise ConfigError(
                "ssl.keystore.key", "<hidden>", f"can be specified only for PEM, but the keystore type is {ktype}"
            )
        if inline_key is None or inline_chain is None:
            raise ConfigError(
                "ssl.keystore.key", "<hidden>", "ssl.keystore.key and ssl.keystore.certificate.chain go together"
            )
        if location is not None:
            raise ConfigError("ssl.keystore.location", location, "both a keystore location and an inline key are set")
        if password is not None:
            raise ConfigError(
                "ssl.keystore.password", "<hidden>", "cannot be specified with PEM: set ssl.key.password only"
            )
        return KeyMaterial(
            _pem_key(inline_key.encode(), key_password, "ssl.keystore.key", "<inline>"),
            _pem_certs(inline_chain.encode(), "ssl.keystore.certificate.chain", "<inline>"),
        )
    if location is None:
        if password is not None:
            raise ConfigError("ssl.keystore.password", "<hidden>", "set, but ssl.keystore.location is not")
        return None
    if ktype == "PEM":
        if password is not None:
            raise ConfigError(
                "ssl.keystore.password", "<hidden>", "cannot be specified with PEM: set ssl.key.password only"
            )
        data = _read(location, "ssl.keystore.location")
        return KeyMaterial(
            _pem_key(data, key_password, "ssl.keystore.location", location),
            _pem_certs(data, "ssl.keystore.location", location),
        )
    if ktype == "PKCS12":
        if password is None:
            raise ConfigError("ssl.keystore.password", None, "a PKCS12 keystore needs its password")
        try:
            k, cert, extra = pkcs12.load_key_and_certificates(
                _read(location, "ssl.keystore.location"), password.encode()
            )
        except ValueError:
            raise ConfigError(
                "ssl.keystore.location", location, "not a PKCS12 keystore, or ssl.keystore.password is wrong"
            ) from None
        if k is None or cert is None:
            raise ConfigError("ssl.keystore.location", location, "the PKCS12 keystore holds no private key entry")
        return KeyMaterial(k, [cert, *extra])
    if ktype == "JKS":
        raise ConfigError("ssl.keystore.type", ktype, _JKS_HINT)
    raise ConfigError("ssl.keystore.type", ktype, "expected PEM or PKCS12")


def load_truststore(get: Getter) -> list[x509.Certificate] | None:
    """The CA certificates this side trusts, or None (then the system's default CAs)."""
    ttype = str(get("ssl.truststore.type") or "JKS").upper()
    location = get("ssl.truststore.location")
    password = get("ssl.truststore.password")
    inline = get("ssl.truststore.certificates")
    if inline is not None:
        if ttype != "PEM":
            raise ConfigError("ssl.truststore.certificates", "<inline>", f"can be specified only for PEM, not {ttype}")
        if location is not None:
            raise ConfigError("ssl.truststore.location", location, "both a truststore location and inline certificates")
        return _pem_certs(inline.encode(), "ssl.truststore.certificates", "<inline>")
    if location is None:
        if password is not None:
            raise ConfigError("ssl.truststore.password", "<hidden>", "set, but ssl.truststore.location is not")
        return None
    if ttype == "PEM":
        if password is not None:
            raise ConfigError("ssl.truststore.password", "<hidden>", "cannot be specified for a PEM truststore")
        return _pem_certs(_read(location, "ssl.truststore.location"), "ssl.truststore.location", location)
    if ttype == "PKCS12":
        try:
            store = pkcs12.load_pkcs12(
                _read(location, "ssl.truststore.location"), password.encode() if password else None
            )
        except ValueError:
            raise ConfigError(
                "ssl.truststore.location", location, "not a PKCS12 truststore, or ssl.truststore.password is wrong"
            ) from None
        certs = [c.certificate for c in store.additional_certs]
        if store.cert is not None:
            certs.insert(0, store.cert.certificate)
        if not certs:
            raise ConfigError("ssl.truststore.location", location, "the PKCS12 truststore holds no certificate")
        return certs
    if ttype == "JKS":
        raise ConfigError("ssl.truststore.type", ttype, _JKS_HINT)
    raise ConfigError("ssl.truststore.type", ttype, "expected PEM or PKCS12")


def _install_key(ctx: ssl.SSLContext, material: KeyMaterial) -> None:
    once = secrets.token_urlsafe(24)
    pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in material.chain)
    pem += material.key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(once.encode()),
    )
    fd, path = tempfile.mkstemp(prefix="kopfka-key-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        try:
            ctx.load_cert_chain(path, password=once)
        except ssl.SSLError as exc:
            raise ConfigError(
                "ssl.keystore.location", "<keystore>", f"OpenSSL refused the key/certificate: {exc}"
            ) from None
    finally:
        os.unlink(path)


def _trust(ctx: ssl.SSLContext, certs: list[x509.Certificate] | None, purpose: ssl.Purpose) -> None:
    if certs is None:
        ctx.load_default_certs(purpose)
        return
    ctx.load_verify_locations(cadata="".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs))


def _protocols(ctx: ssl.SSLContext, get: Getter) -> None:
    versions = sorted(_TLS_VERSIONS[v] for v in get("ssl.enabled.protocols"))
    if not versions:
        raise ConfigError("ssl.enabled.protocols", "", "no TLS version enabled")
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    ciphers = get("ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(ciphers))
        except ssl.SSLError:
            raise ConfigError(
                "ssl.cipher.suites", ",".join(ciphers), "no cipher OpenSSL knows (use OpenSSL names)"
            ) from None


def server_context(get: Getter, client_auth: str) -> ssl.SSLContext:
    """A listener's context: its keystore (required), truststore, client authentication."""
    material = load_keystore(get)
    if material is None:
        raise ConfigError("ssl.keystore.location", None, "a TLS listener needs a keystore (or PEM ssl.keystore.key)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(ctx, get)
    _install_key(ctx, material)
    ctx.verify_mode = CLIENT_AUTH[client_auth]
    if ctx.verify_mode != ssl.CERT_NONE:
        _trust(ctx, load_truststore(get), ssl.Purpose.CLIENT_AUTH)
    return ctx


def client_context(get: Getter) -> ssl.SSLContext:
    """A client's context: trust (truststore or system CAs), optional client certificate for
    mutual TLS, and hostname verification unless ssl.endpoint.identification.algorithm is empty."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(ctx, get)
    algo = str(get("ssl.endpoint.identification.algorithm") or "").strip().lower()
    if algo not in ("", "https"):
        raise ConfigError("ssl.endpoint.identification.algorithm", algo, "expected https or empty")
    ctx.check_hostname = algo == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    _trust(ctx, load_truststore(get), ssl.Purpose.SERVER_AUTH)
    material = load_keystore(get)
    if material is not None:
        _install_key(ctx, material)
    return ctx
