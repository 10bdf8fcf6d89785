"""The API keys of ``HYGIEIA_API_KEYS`` (``name=key,name=key``): kept as SHA-256 digests only, checked
in constant time. The key's name is who is asking: it names the key's conversations."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

from agent.errors import ConfigError

MIN_KEY_CHARS = 24
KEY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,32}")
ENV = "HYGIEIA_API_KEYS"


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "replace")).digest()


@dataclass(frozen=True, slots=True)
class ApiKeys:
    """The digests of the configured keys, by key name."""

    digests: tuple[tuple[str, bytes], ...]

    @classmethod
    def parse(cls, raw: str) -> ApiKeys:
        """Keys from the environment's value; a one-line ConfigError for a malformed or weak one
        (the message never shows a key)."""
        pairs: list[tuple[str, bytes]] = []
        for index, entry in enumerate(raw.split(","), 1):
            entry = entry.strip()
            if not entry:
                continue
            name, sep, key = entry.partition("=")
            name, key = name.strip(), key.strip()
            if not sep or not KEY_NAME.fullmatch(name):
                raise ConfigError(
                    f"{ENV}: entry {index} is not 'name=key' with a name of 1-32 letters, digits, "
                    "'.', '_' or '-'"
                )
            if len(key) < MIN_KEY_CHARS:
                raise ConfigError(
                    f"{ENV}: the key of {name!r} is too short ({len(key)} characters): use at least "
                    f"{MIN_KEY_CHARS}, for example: "
                    "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
                )
            if any(name == known for known, _ in pairs):
                raise ConfigError(f"{ENV}: the name {name!r} is given twice")
            pairs.append((name, _digest(key)))
        if not pairs:
            raise ConfigError(f"{ENV} is set but holds no 'name=key' pair")
        return cls(tuple(pairs))

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.digests]

    def identify(self, given: str) -> str | None:
        """The name of the key ``given`` is, or None. Every digest is compared (no early exit), so the
        time taken says nothing about which key, or how much of one, was right."""
        digest = _digest(given)
        found: str | None = None
        for name, expected in self.digests:
            if hmac.compare_digest(digest, expected):
                found = name
        return found
