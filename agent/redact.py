"""Secret redaction for text that leaves our hands: summarizer input and output, and logs.

Two kinds of rule: the shapes of well-known credentials (provider prefixes, PEM blocks,
JWTs, bot tokens, webhook URLs), and values whose *key* names a secret (``"token": "..."``,
``api_key=...``, ``Authorization: Bearer ...``) in JSON, YAML, env or query-string form.
Every pattern is linear (no nested quantifiers), so a long text costs one pass per rule.
"""

from __future__ import annotations

import logging
import re

REDACTED = "[REDACTED]"

_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\s]*")

# Credentials recognised by their shape alone.
_SHAPES: tuple[re.Pattern[str], ...] = (
    re.compile(r"\bsk-(?:ant-|proj-|svcacct-)?[A-Za-z0-9_\-]{16,}"),  # Anthropic, OpenAI
    re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"),  # Stripe secret and restricted keys
    re.compile(r"\bwhsec_[A-Za-z0-9+/=]{16,}"),  # Stripe webhook secrets
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),  # Google API keys
    re.compile(r"\bGOCSPX-[A-Za-z0-9_\-]{16,}"),  # Google OAuth client secrets
    re.compile(r"\bya29\.[A-Za-z0-9_\-]{16,}"),  # Google OAuth access tokens
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}"),  # GitHub fine-grained tokens
    re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"),  # GitLab
    re.compile(r"\bx(?:ox[abeoprs]|app)-[A-Za-z0-9-]{10,}"),  # Slack bot, user, app, refresh tokens
    re.compile(r"hooks\.slack\.com/services/[A-Za-z0-9/_\-]+"),  # Slack webhooks
    re.compile(r"discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]+"),  # Discord webhooks
    re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b"),  # AWS key ids
    re.compile(r"(?<!\d)\d{5,12}:[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"),  # Telegram bot tokens
    # Discord bot tokens (three base64url parts) and JWTs.
    re.compile(r"\b[A-Za-z0-9_-]{23,28}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,40}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{30,}"),  # Hugging Face
    re.compile(r"\bnpm_[A-Za-z0-9]{30,}"),  # npm
    re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),  # SendGrid
    re.compile(r"\bpypi-[A-Za-z0-9_\-]{30,}"),  # PyPI
    re.compile(r"\bdo[por]_v1_[a-f0-9]{64}\b"),  # DigitalOcean
    re.compile(r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b"),  # Shopify
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
_URL_PASSWORD = re.compile(r"(://[^/\s:@]+:)[^@\s/]+(@)")


def _keep_key(match: re.Match[str]) -> str:
    value = match.group(3)
    quote = value[0] if value[0] in "\"'" else ""
    return f"{match.group(1)}{match.group(2)}{quote}{REDACTED}{quote}"


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced by ``[REDACTED]``."""
    text = _redact_pem(text)
    for pattern in _SHAPES:
        text = pattern.sub(REDACTED, text)
    text = _AUTH_HEADER.sub(rf"\g<1>\g<2>{REDACTED}", text)
    text = _API_KEY_HEADER.sub(rf"\g<1>\g<2>{REDACTED}", text)
    text = _KEY_VALUE.sub(_keep_key, text)
    return _URL_PASSWORD.sub(rf"\g<1>{REDACTED}\g<2>", text)


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
