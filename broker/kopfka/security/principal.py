"""Who is on the other end: KafkaPrincipal and Kafka's DefaultKafkaPrincipalBuilder rules.

PLAINTEXT and a TLS peer without a certificate are `User:ANONYMOUS`; a TLS client certificate
gives `User:<DN>` with the subject in RFC 2253 form (as Java's X500Principal.getName()),
rewritten by `ssl.principal.mapping.rules`; SASL gives `User:<authorization id>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kopfka.config.definitions import ConfigError

USER_TYPE = "User"


@dataclass(frozen=True)
class KafkaPrincipal:
    """Kafka's KafkaPrincipal: the `Type:name` identity a request is authorized as."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`Type:name` (Kafka's SecurityUtils.parseKafkaPrincipal); ValueError when malformed."""
        ptype, sep, name = text.partition(":")
        if not sep or not ptype or not name:
            raise ValueError(f"expected a principal of the form Type:name, got {text!r}")
        return cls(ptype, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")

# Kafka's SslPrincipalMapper rule grammar: DEFAULT | RULE:pattern/replacement/[LU]
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLIT = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSE = re.compile(_RULE)


@dataclass(frozen=True)
class _Rule:
    """One ssl.principal.mapping.rules rule: DEFAULT (pattern None), or a pattern, replacement and L/U case."""

    pattern: re.Pattern[str] | None  # None = DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        out = self.pattern.sub(_python_template(self.replacement, self.pattern.groups), dn)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def _python_template(java: str, groups: int) -> str:
    """A Java replaceAll replacement (`$n` group references, `\\x` escapes) as a re.sub template;
    a reference to a group that does not exist stays literal text, as Kafka's mapper makes it."""
    out: list[str] = []
    i = 0
    while i < len(java):
        c = java[i]
        if c == "\\" and i + 1 < len(java):
            out.append(java[i + 1].replace("\\", "\\\\"))
            i += 2
        elif c == "$" and i + 1 < len(java) and java[i + 1].isdigit():
            num, j = int(java[i + 1]), i + 2
            while j < len(java) and java[j].isdigit() and num * 10 + int(java[j]) <= groups:
                num, j = num * 10 + int(java[j]), j + 1
            if num > groups:
                out.append("$")
                i += 1
            else:
                out.append(f"\\g<{num}>")
                i = j
        else:
            out.append("\\\\" if c == "\\" else c)
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    """`ssl.principal.mapping.rules`: the first rule that matches the whole DN names the user."""

    def __init__(self, rules: str | None) -> None:
        text = (rules or "DEFAULT").strip()
        self.rules: list[_Rule] = []
        for m in _SPLIT.finditer(text):
            rule = m.group(1)
            if not rule:
                continue
            p = _PARSE.match(rule)
            if p is None or p.end() != len(rule):
                raise ConfigError("ssl.principal.mapping.rules", rules, f"Invalid rule: {rule}")
            if p.group(1):
                self.rules.append(_Rule(None))
            elif p.group(2) is not None:
                try:
                    pattern = re.compile(p.group(2))
                except re.error as exc:
                    raise ConfigError(
                        "ssl.principal.mapping.rules", rules, f"bad pattern {p.group(2)!r}: {exc}"
                    ) from None
                self.rules.append(_Rule(pattern, p.group(3), p.group(4)))
            elif p.group(5):
                raise ConfigError("ssl.principal.mapping.rules", rules, f"Invalid rule: {rule}")

    def name(self, dn: str) -> str:
        for rule in self.rules:
            out = rule.apply(dn)
            if out is not None:
                return out
        raise LookupError(f"No rules apply to {dn}")


def certificate_dn(der: bytes) -> str:
    """The subject DN of a DER certificate in RFC 2253 order (most specific RDN first)."""
    from cryptography import x509  # here: a broker without TLS listeners never needs it

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def ssl_principal(peer_der: bytes | None, mapper: SslPrincipalMapper) -> KafkaPrincipal:
    if not peer_der:
        return ANONYMOUS
    return KafkaPrincipal(USER_TYPE, mapper.name(certificate_dn(peer_der)))
