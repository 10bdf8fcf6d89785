"""Wire-level pieces of the fake Bot API: request parsing, error bodies, records, server-made entities."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.telegram_html import utf16_units

_AUTO_ENTITIES = re.compile(
    r"(?P<command>^/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?)|(?P<mention>(?<![\w@])@[A-Za-z0-9_]{5,32})"
)


@dataclass(frozen=True, slots=True)
class FakeDocument:
    """A file attached to a pushed message; ``size`` overrides the reported size."""

    file_name: str
    content: bytes
    mime_type: str | None = None
    size: int | None = None


@dataclass(slots=True)
class SentMessage:
    """One message the bot sent, as the fake received and stored it."""

    chat_id: int | str
    text: str
    parse_mode: str | None
    message_thread_id: int | None
    reply_parameters: dict[str, Any] | None
    message_id: int
    plain_text: str
    entities: list[dict[str, Any]]
    params: dict[str, Any]


@dataclass(slots=True)
class ApiCall:
    method: str
    params: dict[str, Any]
    status: int = 200
    at: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class Failure:
    status: int
    description: str
    retry_after: int | None


class ApiError(Exception):
    """Raised by a method handler: answered as ``{\"ok\": false, ...}`` with ``status``."""

    def __init__(self, status: int, description: str, *, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after


def error_response(status: int, description: str, *, retry_after: int | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return web.json_response(body, status=status)


async def read_params(request: web.Request) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for key, value in request.query.items():
        params[key] = _decode(value)
    if request.content_type == "application/json":
        body = await request.json() if request.can_read_body else None
        if isinstance(body, dict):
            params.update(body)
    elif request.can_read_body:
        form = await request.post()
        for name, field_value in form.items():
            params[name] = _decode(field_value) if isinstance(field_value, str) else field_value
    return params


def _decode(value: str) -> Any:
    """PTB JSON-encodes every form value; a bare string that is not JSON stays as it is."""
    try:
        return json.loads(value)
    except ValueError:
        return value


def chat_key(value: Any) -> int | str:
    if isinstance(value, int):
        return value
    text = str(value)
    return int(text) if text.lstrip("-").isdigit() else text


def auto_entities(text: str) -> list[dict[str, Any]]:
    """The entities Telegram's server adds by itself: a leading bot command and @mentions."""
    found = []
    for m in _AUTO_ENTITIES.finditer(text):
        kind = "bot_command" if m.group("command") else "mention"
        offset = utf16_units(text[: m.start()])
        found.append({"type": kind, "offset": offset, "length": utf16_units(m.group(0))})
    return found
