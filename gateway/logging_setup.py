"""Logging for the service: JSON lines when not on a terminal, Rich text on one; never a secret.

Every handler of the root logger carries :class:`RedactingFilter`, which rewrites the
message, its arguments and any traceback text before a formatter sees them: the exact
configured secrets (API key, bot tokens, admin token) and anything shaped like a key
or token are replaced by ``[REDACTED]``.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from logging.handlers import RotatingFileHandler
from typing import Any

from agent.redact import REDACTED as MASK
from agent.redact import redact
from gateway.config import SECRET_FIELDS, Settings

# Standard LogRecord attributes; anything else on a record is a structured field.
_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
_MAX_FIELD_DEPTH = 20
PAYLOAD_LOGGERS = {
    **dict.fromkeys(("telegram", "discord", "anthropic", "httpx", "httpcore"), logging.INFO),
    **dict.fromkeys(("aiohttp", "websockets", "apscheduler", "uvicorn", "fastapi"), logging.INFO),
    # SQL logs statements with their parameters at INFO already.
    **dict.fromkeys(("aiosqlite", "sqlalchemy", "psycopg", "asyncpg"), logging.WARNING),
}
"""Libraries that log payloads (message text) below a level, and that level: held there at any level."""


def redact_text(text: str) -> str:
    """Keys, tokens and URL passwords replaced by ``[REDACTED]`` (see :mod:`agent.redact`)."""
    return redact(text)


class RedactingFilter(logging.Filter):
    """Rewrites a record so that no configured secret and nothing key-shaped reaches a handler."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return redact_text(text)

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.redact(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        for name, value in list(vars(record).items()):
            if name not in _RESERVED:
                setattr(record, name, self._field(value))
        return True

    def _field(self, value: object, depth: int = 0) -> object:
        """A structured field with every string in it redacted, however deep (keys too); an object
        of another type is logged as its redacted text, since a formatter would print it anyway."""
        if value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, str):
            return self.redact(value)
        if depth >= _MAX_FIELD_DEPTH:
            return MASK
        if isinstance(value, dict):
            return {str(self._field(k, depth + 1)): self._field(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            return [self._field(item, depth + 1) for item in value]
        return self.redact(str(value))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, structured fields, exc."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name, value in vars(record).items():
            if name not in _RESERVED and not name.startswith("_"):
                payload[name] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            payload["exc"] = record.exc_text
        return json.dumps(payload, ensure_ascii=False, default=str)


def configured_secrets(settings: Settings) -> list[str]:
    """The secret values configured for this run (to be masked wherever they appear)."""
    values: list[str] = []
    for name in SECRET_FIELDS:
        secret = getattr(settings, name, None)
        if secret is not None:
            values.append(secret.get_secret_value())
    if settings.telegram.webhook_secret is not None:
        values.append(settings.telegram.webhook_secret.get_secret_value())
    return [v for v in values if v]


class OneLineFormatter(logging.Formatter):
    """``warning: what happened`` — one readable line for a person chatting in the terminal.

    The details (fields, traceback) are in the JSON log file, which the line points to.
    """

    def __init__(self, log_path: str | None) -> None:
        super().__init__()
        self._log_path = log_path

    def format(self, record: logging.LogRecord) -> str:
        lines = record.getMessage().strip().splitlines() or [""]
        text = lines[0]
        if (record.exc_info or record.exc_text or len(lines) > 1) and self._log_path:
            text += f" (details in {self._log_path})"
        return f"{record.levelname.lower()}: {text}"


def configure_logging(
    settings: Settings, *, stream: Any = None, log_file: bool = True, chat: bool = False
) -> None:
    """Install the root handlers (stderr, plus a JSON file under ``data_dir/logs``) with redaction.

    ``chat``: a person is chatting on this terminal (the interactive console), so stderr shows
    only warnings and errors, each as one line; everything else goes to the log file only.
    """
    stream = stream if stream is not None else sys.stderr
    use_json = settings.log_format == "json" or (
        settings.log_format == "auto" and not (hasattr(stream, "isatty") and stream.isatty())
    )
    handlers: list[logging.Handler] = []
    file_handler = _file_handler(settings) if log_file else None
    handler: logging.Handler
    if chat:
        handler = logging.StreamHandler(stream)
        handler.setLevel(logging.WARNING)
        log_path = getattr(file_handler, "baseFilename", None)
        handler.setFormatter(OneLineFormatter(log_path))
    elif use_json:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(JsonFormatter())
    else:
        handler = _text_handler(stream)
    handlers.append(handler)
    if file_handler is not None:
        handlers.append(file_handler)

    redaction = RedactingFilter(configured_secrets(settings))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    for item in handlers:
        # Logger-level filters do not see records propagated from child loggers: filter per handler.
        item.addFilter(redaction)
        root.addHandler(item)
    root.setLevel(settings.log_level)
    # Chatty libraries stay at WARNING unless we debug.
    if settings.log_level != "DEBUG":
        for name in ("httpx", "httpcore", "anthropic", "telegram", "apscheduler", "aiosqlite", "sqlalchemy"):
            logging.getLogger(name).setLevel(logging.WARNING)
    # Even then, never below INFO (SQL: WARNING) for these: at DEBUG they log whole requests, updates and SQL
    # parameters, so every message's text, where no erasure can reach it. Ours log ids and sizes.
    for name, floor in PAYLOAD_LOGGERS.items():
        library = logging.getLogger(name)
        if library.getEffectiveLevel() < floor:
            library.setLevel(floor)


def _text_handler(stream: Any) -> logging.Handler:
    from rich.console import Console
    from rich.logging import RichHandler

    handler = RichHandler(console=Console(file=stream), show_path=False, rich_tracebacks=False, markup=False)
    handler.setFormatter(logging.Formatter("%(message)s"))
    return handler


def _file_handler(settings: Settings) -> logging.Handler | None:
    try:
        directory = settings.data_dir / "logs"
        directory.mkdir(parents=True, exist_ok=True)
        handler = RotatingFileHandler(
            directory / "hygieia.log", maxBytes=10_000_000, backupCount=5, encoding="utf-8"
        )
    except OSError:
        return None
    handler.setFormatter(JsonFormatter())
    return handler
