"""Kafka's config providers (KIP-297, KIP-993): `${name:path:key}` variables in server.properties,
resolved when the config is read.

    config.providers=dir,file
    config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider
    config.providers.dir.param.allowed.paths=/etc/kopfka/tls
    ssl.keystore.type=PEM
    ssl.keystore.certificate.chain=${dir:/etc/kopfka/tls:tls.crt}
    ssl.keystore.key=${dir:/etc/kopfka/tls:tls.key}
    ssl.truststore.type=PEM
    ssl.truststore.certificates=${dir:/etc/kopfka/tls:ca.crt}

This is how a broker in a pod reads the PEM files of a mounted Kubernetes Secret (tls.crt,
tls.key, ca.crt) without copying them into its config. FileConfigProvider reads a key of a
properties file, EnvVarConfigProvider an environment variable. Unlike Kafka, which leaves a
variable it cannot resolve in place (to fail later, obscurely), a missing file or key is a
ConfigError naming the config key and the path; values are never echoed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from kopfka.config.definitions import ConfigError

FILE = "org.apache.kafka.common.config.provider.FileConfigProvider"
DIRECTORY = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
ENV = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
PREFIX = "config.providers"
_VAR = re.compile(r"\$\{([A-Za-z0-9_.-]+):(?:([^:}]*):)?([^}]*)\}")  # ${provider:[path:]key}


class _Provider:
    def __init__(self, name: str, cls: str, allowed: str | None) -> None:
        if cls not in (FILE, DIRECTORY, ENV):
            raise ConfigError(f"{PREFIX}.{name}.class", cls, f"expected one of {FILE}, {DIRECTORY}, {ENV}")
        self.name, self.cls = name, cls
        self.allowed = [Path(os.path.normpath(p.strip())) for p in (allowed or "").split(",") if p.strip()]

    def _path(self, key: str, path: str | None) -> Path:
        if not path:
            raise ConfigError(key, "<hidden>", f"config provider {self.name} needs ${{{self.name}:PATH:KEY}}")
        p = Path(os.path.normpath(path))
        if self.allowed and not any(p == a or p.is_relative_to(a) for a in self.allowed):
            raise ConfigError(key, "<hidden>", f"{path} is outside {PREFIX}.{self.name}.param.allowed.paths")
        return p

    def get(self, key: str, path: str | None, name: str) -> str:
        if self.cls == ENV:
            if name not in os.environ:
                raise ConfigError(key, "<hidden>", f"environment variable {name} is not set")
            return os.environ[name]
        p = self._path(key, path)
        if self.cls == DIRECTORY:
            f = p / name
            if "/" in name or not f.is_file():
                raise ConfigError(key, "<hidden>", f"config provider {self.name}: no file {name} in {p}")
            return f.read_text(encoding="utf-8")
        from kopfka.config.server_config import read_properties

        if not p.is_file():
            raise ConfigError(key, "<hidden>", f"config provider {self.name}: no file {p}")
        props = read_properties(p)
        if name not in props:
            raise ConfigError(key, "<hidden>", f"config provider {self.name}: no key {name} in {p}")
        return props[name]


def is_provider_key(key: str) -> bool:
    return key == PREFIX or key.startswith(PREFIX + ".")


def resolve(raw: Mapping[str, str]) -> dict[str, str]:
    """Replace the variables of the declared providers; other `${...}` are left alone."""
    names = [n.strip() for n in raw.get(PREFIX, "").split(",") if n.strip()]
    if not names:
        return dict(raw)
    providers = {}
    for n in names:
        cls = raw.get(f"{PREFIX}.{n}.class")
        if not cls:
            raise ConfigError(f"{PREFIX}.{n}.class", None, f"config provider {n} is declared without a class")
        providers[n] = _Provider(n, cls.strip(), raw.get(f"{PREFIX}.{n}.param.allowed.paths"))
    out = {}
    for key, value in raw.items():
        if is_provider_key(key):
            out[key] = value
            continue

        def sub(m: re.Match[str], key: str = key) -> str:
            p = providers.get(m.group(1))
            return m.group(0) if p is None else p.get(key, m.group(2), m.group(3))

        out[key] = _VAR.sub(sub, value)
    return out
