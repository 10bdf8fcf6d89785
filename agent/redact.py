"""Secret redaction for text that leaves our hands: summarizer input and output, and logs.

Two kinds of rule: the shapes of well-known credentials (provider prefixes, PEM blocks,
JWTs, bot tokens, webhook URLs), and values whose *key* names a secret (``"token": "..."``,
``api_key=...``, ``Authorization: Bearer ...``) in JSON, YAML, env or query-string form.
Every pattern is linear (no nested quantifiers), so a long text costs one pass per rule.
"""

from __future__ import annotations

import logging
import re
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass

REDACTED = "[REDACTED]"

_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\s]*")

# Credentials recognised by their shape alone, each with the literal text every match of it
# contains: a rule whose literals are all absent is skipped (``in`` costs a fraction of a regex
# pass, and most text holds no credential at all).
_SHAPES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"\bsk-(?:ant-|proj-|svcacct-)?[A-Za-z0-9_\-]{16,}"), ("sk-",)),  # Anthropic, OpenAI
    # Stripe secret and restricted keys
    (re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"), ("_live_", "_test_")),
    (re.compile(r"\bwhsec_[A-Za-z0-9+/=]{16,}"), ("whsec_",)),  # Stripe webhook secrets
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"), ("AIza",)),  # Google API keys
    (re.compile(r"\bGOCSPX-[A-Za-z0-9_\-]{16,}"), ("GOCSPX-",)),  # Google OAuth client secrets
    (re.compile(r"\bya29\.[A-Za-z0-9_\-]{16,}"), ("ya29.",)),  # Google OAuth access tokens
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),  # GitHub
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}"), ("github_pat_",)),  # GitHub fine-grained tokens
    (re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"), ("glpat-",)),  # GitLab
    # Slack bot, user, app, refresh tokens
    (re.compile(r"\bx(?:ox[abeoprs]|app)-[A-Za-z0-9-]{10,}"), ("xox", "xapp-")),
    (re.compile(r"hooks\.slack\.com/services/[A-Za-z0-9/_\-]+"), ("hooks.slack.com/services/",)),
    (re.compile(r"discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]+"), (".com/api/webhooks/",)),
    (  # AWS key ids
        re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b"),
        ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA"),
    ),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), ("eyJ",)),  # JWTs
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}"), ("hf_",)),  # Hugging Face
    (re.compile(r"\bnpm_[A-Za-z0-9]{30,}"), ("npm_",)),  # npm
    (re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"), ("SG.",)),  # SendGrid
    (re.compile(r"\bpypi-[A-Za-z0-9_\-]{30,}"), ("pypi-",)),  # PyPI
    (re.compile(r"\bdo[por]_v1_[a-f0-9]{64}\b"), ("_v1_",)),  # DigitalOcean
    (re.compile(r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b"), ("shpat_", "shpss_", "shpca_", "shppa_")),
)
# Shapes with no literal, each gated by a cheap pattern that every match contains and that
# starts with a literal character (the regex engine then jumps from one ':' or '.' to the next).
_GATED: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = (
    (  # Telegram bot tokens (bot ids grow: room up to 16 digits)
        re.compile(r"(?<!\d)\d{5,16}:[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"),
        re.compile(r":[A-Za-z0-9_-]{35}"),
    ),
    (  # ... and URL-encoded, as in a webhook URL passed as a query parameter
        re.compile(r"(?<!\d)\d{5,16}%3[Aa][A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"),
        re.compile(r"%3[Aa][A-Za-z0-9_-]{35}"),
    ),
    (  # A bare AWS secret access key: exactly 40 base64 characters mixing upper, lower and digits
        # (a hex digest has no upper or no lower case letter, a longer base64 run is not bounded).
        re.compile(
            r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[a-z])"
            r"(?=[A-Za-z0-9/+]{0,39}[0-9])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
        ),
        re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"),
    ),
    (  # Discord bot tokens (three base64url parts)
        re.compile(r"\b[A-Za-z0-9_-]{23,28}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,40}\b"),
        re.compile(r"\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27}"),
    ),
)

# A word that names a secret (alone, or ending a compound key such as TELEGRAM_BOT_TOKEN), then = or :,
# then the value (quoted, or up to a delimiter). The compound's head is not matched, only looked at:
# matching it as a repeated group would backtrack quadratically over a long identifier.
_SECRET_KEY = (
    r"(?:(?<=[_.-])|(?<![A-Za-z0-9]))"
    r"(?:password|passwd|pwd|passphrase|secret|token|api[_-]?key|apikey|private[_-]?key|access[_-]?key"
    r"|secret[_-]?key|account[_-]?key|credentials?|auth[_-]?token|session[_-]?key)"
)
_KEY_VALUE = re.compile(
    rf"(?i)({_SECRET_KEY})"
    r"([\"']?[ \t]*[=:][ \t]*)"
    r"(\"(?:[^\"\\\n]|\\.)+\"|'[^'\n]+'|[^\s,;&\"'<>{}()\[\]]{6,})"
)
_AUTH_HEADER = re.compile(r"(?i)\b(bearer|basic|authorization:[ \t]*token)([ \t]+)[A-Za-z0-9._~+/=-]{8,}")
_API_KEY_HEADER = re.compile(r"(?i)\b(x-api-key|api-key|x-auth-token)([\"']?[ \t]*:[ \t]*)[^\s,;\"']+")
# The password runs to the authority's last ``@`` (a password may hold one; a host never does); the user
# name may be empty (``redis://:password@host``), whatever the scheme.
_URL_PASSWORD = re.compile(r"(://[^/\s:@]*:)[^\s/]+(@)")


def _keep_key(match: re.Match[str]) -> str:
    value = match.group(3)
    quote = value[0] if value[0] in "\"'" else ""
    return f"{match.group(1)}{match.group(2)}{quote}{REDACTED}{quote}"


Replacement = str | Callable[[re.Match[str]], str]


@dataclass(frozen=True, slots=True)
class _KeyedRule:
    """A case-insensitive rule whose every match starts at one of ``stems`` (lower case), or at
    one of its :data:`_STEM_HEADS` before it, and ends on the line it starts on."""

    pattern: re.Pattern[str]
    replacement: Replacement
    stems: tuple[bytes, ...]


_KEYED: tuple[_KeyedRule, ...] = (
    _KeyedRule(_AUTH_HEADER, rf"\g<1>\g<2>{REDACTED}", (b"bearer", b"basic", b"authorization")),
    _KeyedRule(_API_KEY_HEADER, rf"\g<1>\g<2>{REDACTED}", (b"api-key", b"auth-token")),
    _KeyedRule(
        _KEY_VALUE, _keep_key, (b"passw", b"pwd", b"passphrase", b"secret", b"token", b"key", b"credential")
    ),
)
# Characters that a case-insensitive pattern matches as an ASCII letter although bytes.lower()
# does not make them one (İ ı -> i, ſ -> s, K (Kelvin) -> k): with any of them, the full pass.
_FOLDS_TO_ASCII = ("\u0130", "\u0131", "\u017f", "\u212a")


class _Text:
    """The text being redacted and, made on demand, its UTF-8 bytes: ``in`` on bytes is a memchr
    scan, several times faster than on a str that holds any non-Latin-1 character."""

    def __init__(self, text: str) -> None:
        self.value = text
        self._data: bytes | None = None
        self._lowered: bytes | None = None

    def set(self, text: str) -> None:
        if text is not self.value:
            self.value, self._data, self._lowered = text, None, None

    @property
    def data(self) -> bytes:
        if self._data is None:
            self._data = self.value.encode("utf-8", "surrogatepass")
        return self._data

    @property
    def lowered(self) -> bytes:
        if self._lowered is None:
            self._lowered = self.data.lower()  # ASCII letters only: positions do not move
        return self._lowered

    def has(self, literals: tuple[bytes, ...] | re.Pattern[bytes]) -> bool:
        if isinstance(literals, re.Pattern):
            return literals.search(self.data) is not None
        return any(literal in self.data for literal in literals)


def _gate(literals: tuple[str, ...]) -> tuple[bytes, ...] | re.Pattern[bytes]:
    """How to look for ``literals``: one ``in`` each, or, for a family sharing a head (gh?_,
    AWS's A???, shp??_), one bytes pattern (one scan instead of four to six)."""
    if len(literals) <= 2:
        return tuple(x.encode() for x in literals)
    return re.compile(b"|".join(re.escape(x.encode()) for x in literals))


_SHAPE_GATES = tuple(_gate(literals) for _, literals in _SHAPES)


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced by ``[REDACTED]``.

    The same as applying every rule's ``pattern.sub`` in turn (tests/agent/test_redact.py checks
    it on random text), but a rule only runs where a match could be: this is on the way of every
    summary, whose input is a few hundred thousand characters of transcript.
    """
    current = _Text(_redact_pem(text))
    for (pattern, _), literals in zip(_SHAPES, _SHAPE_GATES, strict=True):
        if current.has(literals):
            current.set(pattern.sub(REDACTED, current.value))
    for pattern, gate in _GATED:
        if gate.search(current.value) is not None:
            current.set(pattern.sub(REDACTED, current.value))
    for rule in _KEYED:
        current.set(_sub_keyed(rule, current))
    if current.has((b"://",)):
        return _URL_PASSWORD.sub(rf"\g<1>{REDACTED}\g<2>", current.value)
    return current.value


# Where a rule's match can start relative to a stem: the heads a keyword can have before it.
_STEM_HEADS: dict[bytes, tuple[int, ...]] = {
    b"token": (0, len("auth"), len("auth_")),
    # apikey, api_key, accesskey/secretkey, access_key/secret_key/privatekey/accountkey/sessionkey,
    # private_key/account_key/session_key
    b"key": (3, 4, 6, 7, 8),
    b"api-key": (0, len("x-")),
    b"auth-token": (len("x-"),),
}


def _candidates(rule: _KeyedRule, current: _Text) -> list[int] | None:
    """Every offset where a match of ``rule`` can start (sorted): before each stem by one of its
    heads; None when only the full pass is exact. The stems are found in the lowered UTF-8 bytes."""
    text = current.value
    if not text.isascii() and any(c in text for c in _FOLDS_TO_ASCII):
        return None
    lowered = current.lowered
    offsets: set[int] = set()
    for stem in rule.stems:
        heads = _STEM_HEADS.get(stem, (0,))
        at = lowered.find(stem)
        while at >= 0:
            for head in heads:
                offsets.add(at - head)
            at = lowered.find(stem, at + 1)
    found = sorted(offsets)
    found = found[bisect_left(found, 0) :]  # a head longer than what precedes its stem
    if not found or len(lowered) == len(text):
        return found
    # An offset found in bytes counts the bytes before it: make it count characters. Only ASCII
    # offsets can start a match, so an offset inside a multi-byte character is dropped.
    data, starts, byte, char = current.data, [], 0, 0
    for offset in found:
        if data[offset] >= 0x80:
            continue
        char += len(data[byte:offset].decode("utf-8", "surrogatepass"))
        byte = offset
        starts.append(char)
    return starts


def _sub_keyed(rule: _KeyedRule, current: _Text) -> str:
    """``rule.pattern.sub(rule.replacement, text)``, trying a match only where one can start."""
    starts = _candidates(rule, current)
    text = current.value
    if starts is None:
        return rule.pattern.sub(rule.replacement, text)
    pieces: list[str] = []
    pos = 0  # text[:pos] is done
    line_end = -1  # the end of the line of the latest start tried (found once per line)
    for start in starts:
        if start < pos:
            continue
        if start >= line_end:  # a match never crosses a line: it needs no more text than that
            found = text.find("\n", start)
            line_end = len(text) if found < 0 else found
        match = rule.pattern.match(text, start, line_end)
        if match is None:
            continue
        template = rule.replacement
        replaced = match.expand(template) if isinstance(template, str) else template(match)
        pieces += [text[pos : match.start()], replaced]
        pos = match.end()
    return "".join(pieces) + text[pos:] if pieces else text


def _redact_pem(text: str) -> str:
    """Private-key blocks, whole or cut short (then up to the end of the base64 body); one pass."""
    pieces: list[str] = []
    pos = 0
    end_search_from: int | None = 0  # None: no END marker anywhere further on
    while (begin := _PEM_BEGIN.search(text, pos)) is not None:
        pieces += [text[pos : begin.start()], REDACTED]
        end = _PEM_END.search(text, begin.end()) if end_search_from is not None else None
        if end is None:
            end_search_from = None
            body = _PEM_BODY.match(text, begin.end())
            pos = body.end() if body is not None else begin.end()
        else:
            pos = end.end()
    return "".join(pieces) + text[pos:] if pieces else text


class RedactingFilter(logging.Filter):
    """A logging filter that redacts secrets from the formatted message of every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True
