"""Rows to records and back: the only place that knows both shapes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Row as SqlRow

from agent.types import ChatMessage, CompactionRecord, ContentBlock, ContextState, MessageKind, Role
from gateway.store.models import SessionRow
from gateway.store.records import (
    InboxRecord,
    InboxStatus,
    OutboxKind,
    OutboxRecord,
    OutboxStatus,
    SessionInfo,
    SessionSummary,
)

Row = Mapping[Any, Any]


def stored_content(content: list[ContentBlock], text: str) -> list[ContentBlock] | None:
    """What ``messages.content`` holds for ``content`` whose searchable text is ``text``.

    NULL for one plain text block equal to ``text`` (most messages): the row would otherwise
    carry its text twice, once in the JSON and once in ``text``. Anything else is kept whole.
    """
    if len(content) == 1:
        block = content[0]
        if block.get("type") == "text" and len(block) == 2 and block.get("text") == text:
            return None
    return content


def content_of(row: Row) -> list[ContentBlock]:
    """A row's content blocks: ``content``, or its ``text`` as one block where that is NULL."""
    stored = row["content"]
    if stored is None:
        return [{"type": "text", "text": row["text"]}]
    return list(stored)


def to_message(row: Row) -> ChatMessage:
    return ChatMessage(
        role=cast(Role, row["role"]),
        content=content_of(row),
        kind=cast(MessageKind, row["kind"]),
        id=int(row["id"]),
        seq=int(row["seq"]),
        author_id=row["author_id"],
        author_name=row["author_name"],
        platform_message_id=row["platform_message_id"],
        created_at=row["created_at"],
        token_estimate=row["token_estimate"],
        active=bool(row["active"]),
        compacted=bool(row["compacted"]),
        compaction_id=row["compaction_id"],
    )


def to_compaction(row: Row) -> CompactionRecord:
    return CompactionRecord(
        id=row["id"],
        session_id=row["session_id"],
        trigger=row["trigger"],
        status=row["status"],
        archived_from_seq=row["archived_from_seq"],
        archived_to_seq=row["archived_to_seq"],
        messages_archived=int(row["messages_archived"]),
        summary_message_id=row["summary_message_id"],
        first_kept_id=row["first_kept_id"],
        tokens_before=int(row["tokens_before"]),
        tokens_after=int(row["tokens_after"]),
        model=row["model"],
        duration_ms=int(row["duration_ms"]),
        focus=row["focus"],
        created_at=row["created_at"],
        restored_at=row["restored_at"],
        strategy=str(row.get("strategy") or "summary"),
    )


SESSION_FIELDS = tuple(f.name for f in dataclasses.fields(SessionInfo))


def to_session(row: SessionRow | SqlRow[Any]) -> SessionInfo:
    """From an ORM row or a Core row of every :data:`SESSION_FIELDS` column."""
    return SessionInfo(**{name: getattr(row, name) for name in SESSION_FIELDS})


def to_session_summary(row: SessionRow, *, active: int, archived: int, compactions: int) -> SessionSummary:
    fields = {name: getattr(row, name) for name in SESSION_FIELDS}
    return SessionSummary(**fields, active=active, archived=archived, compactions=compactions)


def to_inbox(row: Row) -> InboxRecord:
    return InboxRecord(
        id=int(row["id"]),
        platform=row["platform"],
        chat_id=row["chat_id"],
        platform_message_id=row["platform_message_id"],
        session_key=row["session_key"],
        payload=dict(row["payload"] or {}),
        addressed=bool(row["addressed"]),
        status=cast(InboxStatus, row["status"]),
        attempts=int(row["attempts"]),
        received_at=row["received_at"],
        message_id=row["message_id"],
        lease_owner=row["lease_owner"],
        lease_until=row["lease_until"],
        error=row["error"],
    )


def to_outbox(row: Row) -> OutboxRecord:
    return OutboxRecord(
        id=int(row["id"]),
        session_id=row["session_id"],
        target=dict(row["target"] or {}),
        text=row["text"],
        status=cast(OutboxStatus, row["status"]),
        attempts=int(row["attempts"]),
        next_attempt_at=row["next_attempt_at"],
        delivered_ids=[str(x) for x in row["delivered_ids"] or []],
        error=row["error"],
        created_at=row["created_at"],
        sent_at=row["sent_at"],
        message_id=row["message_id"],
        inbox_ids=[int(x) for x in row["inbox_ids"] or []],
        kind=cast(OutboxKind, row["kind"]),
        stream_id=row.get("stream_id"),
    )


_STATE_FIELDS = {f.name: str(f.type) for f in dataclasses.fields(ContextState)}


def state_to_json(state: ContextState) -> dict[str, Any]:
    """ContextState as a JSON object (datetimes as ISO 8601 strings)."""
    out: dict[str, Any] = {}
    for name in _STATE_FIELDS:
        value = getattr(state, name)
        out[name] = value.isoformat() if isinstance(value, datetime) else value
    return out


def state_from_json(data: Mapping[str, Any] | None) -> ContextState:
    """The inverse of :func:`state_to_json`; unknown keys (from a newer version) are ignored."""
    if not data:
        return ContextState()
    values: dict[str, Any] = {}
    for name, type_name in _STATE_FIELDS.items():
        if name not in data:
            continue
        value = data[name]
        if isinstance(value, str) and "datetime" in type_name:
            value = datetime.fromisoformat(value)
        values[name] = value
    return ContextState(**values)
