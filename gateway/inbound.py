"""Inbound text hygiene and the inbox payload: what an :class:`InboundMessage` becomes in SQL and
then in the conversation.

Per-turn data (author, time) rides on the user message as a short header, never in the
system prompt, so the cached prompt prefix stays byte-identical from turn to turn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agent.types import ChatMessage, text_block
from gateway.platforms.base import Attachment, InboundMessage
from gateway.store.records import InboxRecord

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


def edit_of(item: InboxRecord) -> str | None:
    """The platform id of the message an inbox item edits, or ``None`` for a new message."""
    original = item.payload.get("edit_of")
    return str(original) if original else None


def inbox_payload(
    msg: InboundMessage,
    cleaned: CleanText,
    *,
    attachment_chars: int = MAX_ATTACHMENT_CHARS,
    total_chars: int = MAX_TOTAL_CHARS,
) -> dict[str, Any]:
    """The JSON stored with the inbox row: everything needed to rebuild the message later.

    Attachment text is cleaned like message text and capped, each file at ``attachment_chars``
    and the whole message (text and files) at ``total_chars``, with a note saying what was kept;
    the same caps on every platform, so whatever is accepted is stored whole.
    """
    left = max(0, total_chars - len(cleaned.text))
    attachments: list[dict[str, Any]] = []
    for attachment in msg.attachments:
        data = _attachment_dict(attachment)
        if attachment.text:
            data, used = _capped(data, attachment.text, min(attachment_chars, left))
            left -= used
        attachments.append(data)
    return {
        "edit_of": msg.platform_message_id if msg.edited else None,
        "text": cleaned.text,
        "user_id": msg.user_id,
        "user_name": msg.user_name,
        "chat_type": msg.chat_type,
        "thread_id": msg.thread_id,
        "timestamp": msg.timestamp.astimezone(UTC).isoformat(),
        "edited": msg.edited,
        "reply_to_message_id": msg.reply_to_message_id,
        "attachments": attachments,
        "truncated_from": cleaned.original_chars if cleaned.truncated else None,
    }


def _capped(data: dict[str, Any], text: str, room: int) -> tuple[dict[str, Any], int]:
    """``data`` with its text cleaned and cut to ``room`` characters (noted); and the characters kept."""
    cleaned = clean_text(text, room)
    if not cleaned.truncated:
        return {**data, "text": cleaned.text}, len(cleaned.text)
    kept = len(cleaned.text)
    note = (
        f"kept the first {kept:,} of {cleaned.original_chars:,} characters"
        if kept
        else "not read: the message had reached its size limit"
    )
    earlier = data.get("note")
    return {**data, "text": cleaned.text or None, "note": f"{earlier}; {note}" if earlier else note}, kept


def _attachment_dict(a: Attachment) -> dict[str, Any]:
    return {
        "kind": a.kind,
        "file_id": a.file_id,
        "file_name": a.file_name,
        "mime_type": a.mime_type,
        "size": a.size,
        "text": a.text,
        "note": a.note,
    }


def payload_text(item: InboxRecord) -> str:
    return str(item.payload.get("text") or "")


def message_key(item: InboxRecord) -> str:
    """The idempotency key of the conversation row an inbox item becomes (re-serving appends once)."""
    return edit_of(item) or item.platform_message_id or f"inbox:{item.id}"


def user_message(item: InboxRecord) -> ChatMessage:
    """The conversation message for an inbox item: ``[name, HH:MM UTC] text`` plus attachment notes."""
    payload = item.payload
    name = str(payload.get("user_name") or payload.get("user_id") or "someone")
    at = _timestamp(payload.get("timestamp"), item.received_at)
    lines = [f"[{name}, {at:%H:%M} UTC]"]
    text = payload_text(item)
    if text:
        lines[0] += f" {text}"
    truncated_from = payload.get("truncated_from")
    if truncated_from:
        lines.append(f"[message truncated: the first {len(text):,} of {int(truncated_from):,} characters]")
    for attachment in payload.get("attachments") or []:
        lines.append(_attachment_line(attachment))
    body = "\n".join(lines)
    if not text and len(lines) == 1:
        body += f" {EMPTY_TEXT}"
    return ChatMessage(
        role="user",
        content=[text_block(body)],
        author_id=str(payload.get("user_id") or "") or None,
        author_name=name,
        platform_message_id=message_key(item),
        created_at=at,
    )


def _attachment_line(data: dict[str, Any]) -> str:
    described = ", ".join(
        str(part) for part in (data.get("file_name"), data.get("mime_type"), _size(data.get("size"))) if part
    )
    line = f"[attachment: {data.get('kind', 'file')}{f' ({described})' if described else ''}]"
    if data.get("note"):
        line += f" {data['note']}"
    if data.get("text"):
        line += f"\n{data['text']}"
    return line


def _size(size: Any) -> str | None:
    if not isinstance(size, int):
        return None
    return f"{size / 1024:.0f} KB" if size >= 1024 else f"{size} B"


def _timestamp(value: Any, fallback: datetime) -> datetime:
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return fallback.astimezone(UTC)
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)
    return fallback.astimezone(UTC)
