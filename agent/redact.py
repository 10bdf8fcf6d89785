"""Secret redaction for text that leaves our hands: summarizer input and output, and logs."""

from __future__ import annotations

import logging
import re

REDACTED = "[REDACTED]"

# (pattern, replacement); a replacement may keep a harmless prefix group so the text stays readable.
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Anthropic (sk-ant-...), OpenAI (sk-..., sk-proj-...) and similar API keys.
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"), REDACTED),
    # Telegram bot tokens: <bot id>:<35 chars>.
    (re.compile(r"(?<!\d)\d{5,12}:[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"), REDACTED),
    # Discord bot tokens (three base64url parts) and JWTs, which share the shape.
    (re.compile(r"\b[A-Za-z0-9_-]{23,28}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,40}\b"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), REDACTED),
    # GitHub and Slack tokens.
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"), REDACTED),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), REDACTED),
    # AWS access key ids.
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
    # Authorization headers and bearer tokens.
    (re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1\2" + REDACTED),
    # key=value / key: value pairs whose key names a secret.
    (
        re.compile(
            r"(?i)\b(password|passwd|pwd|passphrase|secret|client_secret|api[_-]?key|access[_-]?token"
            r"|auth[_-]?token|refresh[_-]?token|private[_-]?key|aws_secret_access_key)"
            r"(\"?\s*[=:]\s*)(\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&]+)"
        ),
        r"\1\2" + REDACTED,
    ),
)


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced by ``[REDACTED]``."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that redacts secrets from the formatted message of every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True
