"""Inbound text hygiene and the inbox payload: what an :class:`InboundMessage` becomes in SQL and
then in the conversation.

Per-turn data (author, time) rides on the user message as a short header, never in the
system prompt, so the cached prompt prefix stays byte-identical from turn to turn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast, get_args

from agent.types import ChatMessage, text_block
from gateway.platforms.base import Attachment, InboundMessage, OutboundTarget
from gateway.serving.commands import Command, command_in
from gateway.store.records import InboxRecord
from gateway.wire import AttachmentKind, AttachmentPayload, InboxPayload, WebhookPayload

# NUL and the other C0 controls except tab, newline, carriage return; lone surrogates.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
EMPTY_TEXT = "(empty message)"
MAX_ATTACHMENT_CHARS = 100_000
MAX_TOTAL_CHARS = 200_000
EDIT_MARK = "#edit@"


@dataclass(frozen=True, slots=True)
class CleanText:
    text: str
    original_chars: int
    truncated: bool


def clean_text(text: str, max_chars: int) -> CleanText:
    """Remove NUL, stray control characters and lone surrogates; cap the length (never an error)."""
    cleaned = _SURROGATE.sub("", _CONTROL.sub("", text)).replace("\r\n", "\n")
    original = len(cleaned)
    if original <= max_chars:
        return CleanText(cleaned, original, False)
    return CleanText(cleaned[:max_chars], original, True)


def truncation_note(kept: int, original: int) -> str:
    return (
        f"That's too long for me to read in one go; I kept the first {kept:,} of {original:,} characters. "
        "Send the rest in a separate message if it matters."
    )


def inbox_message_id(msg: InboundMessage) -> str | None:
    """The inbox's idempotency key: the platform id, made unique per edit for edited messages.

    A redelivered update maps to the same key (stored once); each edit of a message is its
    own inbox item, applied to the stored message by :func:`edit_of`.
    """
    if msg.platform_message_id is None or not msg.edited:
        return msg.platform_message_id
    return f"{msg.platform_message_id}{EDIT_MARK}{msg.timestamp.astimezone(UTC).isoformat()}"


def inbox_payload(
    msg: InboundMessage,
    cleaned: CleanText,
    *,
    attachment_chars: int = MAX_ATTACHMENT_CHARS,
    total_chars: int = MAX_TOTAL_CHARS,
) -> InboxPayload:
    """The JSON stored with the inbox row: everything needed to rebuild the message later.

    Attachment text is cleaned like message text and capped, each file at ``attachment_chars``
    and the whole message (text and files) at ``total_chars``, with a note saying what was kept;
    the same caps on every platform, so whatever is accepted is stored whole.
    """
    left = max(0, total_chars - len(cleaned.text))
    attachments: list[AttachmentPayload] = []
    for attachment in msg.attachments:
        data = _attachment_payload(attachment)
        if attachment.text:
            data, used = _capped(data, attachment.text, min(attachment_chars, left))
            left -= used
        attachments.append(data)
    payload = InboxPayload(
        edit_of=msg.platform_message_id if msg.edited else None,
        text=cleaned.text,
        user_id=msg.user_id,
        user_name=msg.user_name,
        chat_type=msg.chat_type,
        thread_id=msg.thread_id,
        timestamp=msg.timestamp.astimezone(UTC).isoformat(),
        edited=msg.edited,
        reply_to_message_id=msg.reply_to_message_id,
        attachments=attachments,
        truncated_from=cleaned.original_chars if cleaned.truncated else None,
    )
    if msg.webhook is not None:
        payload["webhook"] = WebhookPayload(route=msg.webhook.route, deliver_only=msg.webhook.deliver_only)
    return payload


def _capped(data: AttachmentPayload, text: str, room: int) -> tuple[AttachmentPayload, int]:
    """``data`` with its text cleaned and cut to ``room`` characters (noted); and the characters kept."""
    cleaned = clean_text(text, room)
    if not cleaned.truncated:
        return AttachmentPayload(**{**data, "text": cleaned.text}), len(cleaned.text)
    kept = len(cleaned.text)
    note = (
        f"kept the first {kept:,} of {cleaned.original_chars:,} characters"
        if kept
        else "not read: the message had reached its size limit"
    )
    earlier = data["note"]
    noted = f"{earlier}; {note}" if earlier else note
    return AttachmentPayload(**{**data, "text": cleaned.text or None, "note": noted}), kept


def _attachment_payload(a: Attachment) -> AttachmentPayload:
    return AttachmentPayload(
        kind=a.kind,
        file_id=a.file_id,
        file_name=a.file_name,
        mime_type=a.mime_type,
        size=a.size,
        text=a.text,
        note=a.note,
        duration=a.duration,
    )


@dataclass(frozen=True, slots=True)
class InboxItem:
    """An inbox row parsed once, after the claim: what every later step of serving reads.

    ``command`` is the command the text carries when the message is addressed to the bot (an
    edit of one included, so that it is neither run again nor stored as a message);
    :attr:`is_command` says whether it is to be run.
    """

    record: InboxRecord
    payload: InboxPayload
    command: Command | None
    edit_of: str | None
    reply_target: OutboundTarget

    @property
    def id(self) -> int:
        return self.record.id

    @property
    def platform(self) -> str:
        return self.record.platform

    @property
    def chat_id(self) -> str:
        return self.record.chat_id

    @property
    def platform_message_id(self) -> str | None:
        return self.record.platform_message_id

    @property
    def session_key(self) -> str:
        return self.record.session_key

    @property
    def addressed(self) -> bool:
        return self.record.addressed

    @property
    def attempts(self) -> int:
        return self.record.attempts

    @property
    def received_at(self) -> datetime:
        return self.record.received_at

    @property
    def text(self) -> str:
        return self.payload["text"]

    @property
    def user_id(self) -> str | None:
        return self.payload["user_id"]

    @property
    def thread_id(self) -> str | None:
        return self.payload["thread_id"]

    @property
    def is_command(self) -> bool:
        return self.command is not None and self.edit_of is None

    @property
    def deliver_only(self) -> bool:
        """A webhook's text to relay as is, with no model call."""
        hook = self.payload.get("webhook")
        return hook is not None and hook["deliver_only"]


def parse_item(record: InboxRecord) -> InboxItem:
    """The one place an inbox row's JSON is read.

    Raises :class:`ValueError` naming the field when the stored JSON does not have the shape
    (an older version's row, a hand-edited import): the item then goes the way of any item that
    cannot be served (retried, then set aside with its sender told), never served half-read.
    """
    payload = parse_payload(record.payload)
    # A scheduled task's run or a webhook's delivery is no platform message: nothing to quote; and
    # a webhook's text is its sender's, never a command.
    posted = "scheduled_task" in payload or "webhook" in payload
    quoted = None if posted else record.platform_message_id
    return InboxItem(
        record=record,
        payload=payload,
        command=None if "webhook" in payload else command_in(payload["text"], addressed=record.addressed),
        edit_of=payload["edit_of"] or None,
        # A scheduled task's run is no platform message: there is nothing to quote.
        reply_target=OutboundTarget(
            platform=record.platform,
            chat_id=record.chat_id,
            thread_id=payload["thread_id"],
            reply_to_message_id=quoted,
        ),
    )


def parse_payload(raw: dict[str, Any]) -> InboxPayload:
    """``raw`` (the stored JSON) as an :class:`InboxPayload`; a missing field reads as absent."""
    payload = InboxPayload(
        edit_of=_id(raw, "edit_of"),
        text=_text(raw, "text") or "",
        user_id=_id(raw, "user_id"),
        user_name=_text(raw, "user_name"),
        chat_type=_text(raw, "chat_type"),
        thread_id=_id(raw, "thread_id"),
        timestamp=_text(raw, "timestamp") or "",
        edited=_flag(raw, "edited"),
        reply_to_message_id=_id(raw, "reply_to_message_id"),
        attachments=[_parse_attachment(a) for a in _list(raw, "attachments")],
        truncated_from=_count(raw, "truncated_from"),
    )
    task = _id(raw, "scheduled_task")
    if task:
        payload["scheduled_task"] = task
    hook = raw.get("webhook")
    if hook is not None:
        if not isinstance(hook, dict):
            raise _wrong("webhook", hook, "an object")
        payload["webhook"] = WebhookPayload(
            route=_text(hook, "route") or "", deliver_only=_flag(hook, "deliver_only")
        )
    return payload


def _parse_attachment(raw: object) -> AttachmentPayload:
    if not isinstance(raw, dict):
        raise ValueError(f"inbox payload: an attachment is {type(raw).__name__}, not an object")
    kind = raw.get("kind") or "other"
    if kind not in get_args(AttachmentKind):
        raise ValueError(f"inbox payload: unknown attachment kind {str(kind)[:20]!r}")
    return AttachmentPayload(
        kind=cast(AttachmentKind, kind),
        file_id=_id(raw, "file_id"),
        file_name=_text(raw, "file_name"),
        mime_type=_text(raw, "mime_type"),
        size=_count(raw, "size"),
        text=_text(raw, "text"),
        note=_text(raw, "note"),
        duration=_seconds(raw, "duration"),
    )


def _seconds(raw: dict[str, Any], name: str) -> float | None:
    value = raw.get(name)
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return None if value is None else float(value)
    raise _wrong(name, value, "a number")


def _wrong(name: str, value: object, expected: str) -> ValueError:
    return ValueError(f"inbox payload field {name!r} is {type(value).__name__}, not {expected}")


def _text(raw: dict[str, Any], name: str) -> str | None:
    value = raw.get(name)
    if value is None or isinstance(value, str):
        return value
    raise _wrong(name, value, "text")


def _id(raw: dict[str, Any], name: str) -> str | None:
    """Platform ids: text, or a number some platforms and older rows store as one."""
    value = raw.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _text(raw, name)


def _count(raw: dict[str, Any], name: str) -> int | None:
    value = raw.get(name)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _wrong(name, value, "a whole number")


def _flag(raw: dict[str, Any], name: str) -> bool:
    value = raw.get(name, False)
    if isinstance(value, bool):
        return value
    raise _wrong(name, value, "true or false")


def _list(raw: dict[str, Any], name: str) -> list[object]:
    value = raw.get(name)
    if value is None:
        return []
    if isinstance(value, list):
        return value
    raise _wrong(name, value, "a list")


def message_key(item: InboxItem) -> str:
    """The idempotency key of the conversation row an inbox item becomes (re-serving appends once)."""
    return item.edit_of or item.platform_message_id or f"inbox:{item.id}"


def user_message(item: InboxItem) -> ChatMessage:
    """The conversation message for an inbox item: ``[name, HH:MM UTC] text`` plus attachment notes."""
    payload = item.payload
    name = payload["user_name"] or payload["user_id"] or "someone"
    at = _timestamp(payload["timestamp"], item.received_at)
    lines = [f"[{name}, {at:%H:%M} UTC]"]
    text = item.text
    if text:
        lines[0] += f" {text}"
    truncated_from = payload["truncated_from"]
    if truncated_from:
        lines.append(f"[message truncated: the first {len(text):,} of {truncated_from:,} characters]")
    for attachment in payload["attachments"]:
        lines.append(_attachment_line(attachment))
    body = "\n".join(lines)
    if not text and len(lines) == 1:
        body += f" {EMPTY_TEXT}"
    return ChatMessage(
        role="user",
        content=[text_block(body)],
        author_id=payload["user_id"] or None,
        author_name=name,
        platform_message_id=message_key(item),
        created_at=at,
    )


def _attachment_line(data: AttachmentPayload) -> str:
    described = ", ".join(
        str(part) for part in (data["file_name"], data["mime_type"], _size(data["size"])) if part
    )
    line = f"[attachment: {data['kind']}{f' ({described})' if described else ''}]"
    if data["note"]:
        line += f" {data['note']}"
    if data["text"]:
        line += f"\n{data['text']}"
    return line


def _size(size: int | None) -> str | None:
    if size is None:
        return None
    return f"{size / 1024:.0f} KB" if size >= 1024 else f"{size} B"


def _timestamp(value: str, fallback: datetime) -> datetime:
    if value:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return fallback.astimezone(UTC)
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)
    return fallback.astimezone(UTC)
