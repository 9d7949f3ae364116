"""The `sasl.jaas.config` value: `<LoginModule> <flag> key="value" ...;` (Kafka's JaasConfig).

kopfka reads the options only: `username`/`password` (the credentials a client or the broker's
own inter-broker client presents) and PlainLoginModule's `user_<name>="<password>"` entries
(the PLAIN users a listener accepts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kopfka.config.definitions import ConfigError

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.S)


@dataclass(frozen=True)
class JaasEntry:
    """One login module entry of sasl.jaas.config: module class, control flag and options."""

    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict, repr=False)  # passwords: never in a log line through repr

    def plain_users(self) -> dict[str, str]:
        return {k[5:]: v for k, v in self.options.items() if k.startswith("user_")}


def _tokens(text: str, key: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ConfigError(key, "<hidden>", f"cannot parse JAAS config near character {pos}")
        pos = m.end()
        if m.group(1) is not None:
            out.append(("str", re.sub(r"\\(.)", r"\1", m.group(1))))
        elif m.group(2) is not None:
            out.append(("word", m.group(2)))
        elif m.group(3):
            out.append(("=", "="))
        else:
            out.append((";", ";"))
    return out


def parse(text: str, key: str = "sasl.jaas.config") -> JaasEntry:
    """Parse one login module entry (Kafka allows exactly one in sasl.jaas.config).

    Errors never echo the value: it holds passwords."""
    toks = _tokens(text, key)
    if len(toks) < 3 or toks[0][0] != "word" or toks[1][0] != "word":
        raise ConfigError(key, "<hidden>", "expected '<LoginModule> <flag> [key=value ...];'")
    module, flag = toks[0][1], toks[1][1].lower()
    if flag not in FLAGS:
        raise ConfigError(key, "<hidden>", f"invalid control flag {flag!r} (expected one of {', '.join(FLAGS)})")
    options: dict[str, str] = {}
    i = 2
    while i < len(toks) and toks[i][0] != ";":
        if i + 2 >= len(toks) or toks[i][0] != "word" or toks[i + 1][0] != "=" or toks[i + 2][0] not in ("word", "str"):
            raise ConfigError(key, "<hidden>", "expected key=value options")
        options[toks[i][1]] = toks[i + 2][1]
        i += 3
    if i >= len(toks):
        raise ConfigError(key, "<hidden>", "JAAS config entry must end with ';'")
    if i != len(toks) - 1:
        raise ConfigError(key, "<hidden>", "sasl.jaas.config must contain exactly one login module")
    return JaasEntry(module, flag, options)


def quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def client_jaas(mechanism: str, username: str, password: str) -> str:
    """The sasl.jaas.config line a client uses for PLAIN or SCRAM."""
    module = PLAIN_MODULE if mechanism.upper() == "PLAIN" else SCRAM_MODULE
    return f"{module} required username={quote(username)} password={quote(password)};"
