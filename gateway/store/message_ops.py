"""Messages: append, the active view, single rows, and recall of archived turns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from sqlalchemy import Connection, and_, bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from agent.clock import utcnow
from agent.errors import NotFound, StoreError
from agent.tokens import content_tokens
from agent.types import ChatMessage, ContentBlock, ContextState, RecallPage, UsageRecord, content_text
from gateway.store.base import CONFLICT_RETRIES, Repo, bump_view
from gateway.store.columns import clean_json, clean_text
from gateway.store.convert import content_of, stored_content, to_message
from gateway.store.models import messages, sessions
from gateway.store.search_index import search_values
from gateway.store.session_ops import save_state_in, state_values
from gateway.store.usage_ops import record_usage_in, usage_rows

ORDER = (messages.c.seq, messages.c.sub_seq)
# What a ChatMessage is made of (``text`` is its content where ``content`` is NULL): not
# ``search_cjk`` (only for search) nor the edit history, which the hot path never needs.
MESSAGE_COLUMNS = tuple(
    c for c in messages.c if c.name not in ("search_cjk", "original_content", "edited_at")
)


class MessageOps(Repo):
    async def append_message(self, session_id: str, message: ChatMessage) -> ChatMessage:
        """Persist at the end of the session (``seq = max + 1``); idempotent on ``platform_message_id``.

        The session row is locked (its ``view_version`` moved on) for the transaction that
        reads ``max(seq)`` and inserts (one thread hop on a SQLite file); should a unique key still
        conflict, the append is tried again. The cached active view follows (write-through).
        """
        return await self._append(session_id, prepared(message), None)

    async def append_reply(
        self, session_id: str, message: ChatMessage, usage: UsageRecord, state: ContextState
    ) -> ChatMessage:
        """:meth:`append_message`, with the call's usage and the compression state it taught
        stored in the same transaction (as ``record_usage(..., state=state)`` would)."""
        rows = usage_rows(session_id, usage, utcnow())
        saved = state_values(session_id, state)
        dialect = self._db.dialect

        def also(conn: Connection) -> None:
            record_usage_in(conn, dialect, rows)
            save_state_in(conn, saved)

        return await self._append(session_id, prepared(message), also)

    async def _append(
        self, session_id: str, stored: ChatMessage, also: Callable[[Connection], None] | None
    ) -> ChatMessage:
        def work(conn: Connection) -> tuple[int, ChatMessage, bool]:
            version = lock_view(conn, session_id)
            row, created = append_row(conn, session_id, stored)
            if also is not None:
                also(conn)
            return version, row, created

        for _ in range(CONFLICT_RETRIES):
            try:
                version, row, created = await self._db.write_at_once(work)
            except IntegrityError:
                continue  # lost a race we did not lock against: read the new state and try again
            self._views.advance(session_id, version, [row] if created else [])
            return row
        raise StoreError(f"could not append to session {session_id}: too many concurrent writers")

    async def load_active(self, session_id: str) -> list[ChatMessage]:
        """The active view, from memory while its ``view_version`` is current (one indexed read),
        else from its rows."""

        def work(conn: Connection) -> tuple[int | None, list[ChatMessage] | None, list[ChatMessage]]:
            version = conn.scalar(select(sessions.c.view_version).where(sessions.c.id == session_id))
            if version is None:
                return None, [], []  # no such session
            cached = self._views.get(session_id, int(version))
            return int(version), cached, [] if cached is not None else read_active(conn, session_id)

        version, cached, rows = await self._db.read_at_once(work)
        if cached is not None or version is None:
            return cached or []
        return self._views.put(session_id, version, rows)

    async def get_message(self, message_id: int) -> ChatMessage:
        async with self._tx(write=False) as s:
            row = (await s.execute(select(messages).where(messages.c.id == message_id))).mappings().first()
            if row is None:
                raise NotFound(f"no message {message_id}")
            return to_message(row)

    async def messages_after(self, session_id: str, seq: int) -> list[ChatMessage]:
        """Every row (any state) of the session with a seq above ``seq``, in order."""
        stmt = (
            select(messages).where(messages.c.session_id == session_id, messages.c.seq > seq).order_by(*ORDER)
        )
        async with self._tx(write=False) as s:
            return [to_message(r) for r in (await s.execute(stmt)).mappings()]

    async def record_edit(
        self, session_id: str, platform_message_id: str, content: list[ContentBlock], *, at: datetime
    ) -> ChatMessage | None:
        """Let a stored message follow the platform's edit; its first version is kept.

        The row keeps its place (and its archived state, if it was compacted); its text is
        re-indexed for search. Returns ``None`` when the edited message was never stored.
        """
        cleaned = clean_json(content)
        same = and_(
            messages.c.session_id == session_id, messages.c.platform_message_id == platform_message_id
        )
        async with self._tx() as s:
            row = (await s.execute(select(messages).where(same))).mappings().first()
            if row is None:
                return None
            if row["active"]:
                await bump_view(s, session_id)
            new_text = content_text(cleaned)
            await s.execute(
                update(messages)
                .where(messages.c.id == row["id"])
                .values(
                    content=stored_content(cleaned, new_text),
                    **search_values(new_text),
                    edited_at=at,
                    original_content=row["original_content"] or content_of(row),
                    token_estimate=content_tokens(cleaned),
                )
            )
        self._views.drop(session_id)
        return replace(to_message(row), content=cleaned, token_estimate=content_tokens(cleaned))

    async def recall(
        self,
        session_id: str,
        *,
        compaction_id: str | None = None,
        from_id: int | None = None,
        to_id: int | None = None,
        offset: int = 0,
        limit: int = 20,
    ) -> RecallPage:
        """Archived rows of the session, verbatim, in order; ``total`` counts every match."""
        offset, limit = max(offset, 0), max(limit, 0)
        conditions = [messages.c.session_id == session_id, messages.c.compacted]
        if compaction_id is not None:
            conditions.append(messages.c.compaction_id == compaction_id)
        if from_id is not None:
            conditions.append(messages.c.id >= from_id)
        if to_id is not None:
            conditions.append(messages.c.id <= to_id)
        where = and_(*conditions)
        async with self._tx(write=False) as s:
            total = int(await s.scalar(select(func.count()).select_from(messages).where(where)) or 0)
            rows = await s.execute(select(messages).where(where).order_by(*ORDER).offset(offset).limit(limit))
            page = [to_message(r) for r in rows.mappings()]
        end = offset + len(page)
        return RecallPage(messages=page, total=total, offset=offset, next_offset=end if end < total else None)


def prepared(message: ChatMessage) -> ChatMessage:
    return replace(
        message,
        content=clean_json(message.content),
        created_at=message.created_at or utcnow(),
        active=True,
        compacted=False,
        compaction_id=None,
    )


# Built once: every reply and tool result takes this lock.
_LOCK_VIEW = (
    update(sessions)
    .where(sessions.c.id == bindparam("sid"))
    .values(view_version=sessions.c.view_version + 1)
    .returning(sessions.c.view_version)
)


def lock_view(conn: Connection, session_id: str, **also: object) -> int:
    """Lock the session row for this transaction by moving its ``view_version`` on; the new version.

    One appender per session at a time (on PostgreSQL the UPDATE's row lock, which does not
    block foreign-key checks; SQLite's BEGIN IMMEDIATE already serializes writers). ``also``:
    more columns of the row to set in the same statement.
    """
    if also:
        stmt = (
            update(sessions)
            .where(sessions.c.id == session_id)
            .values(view_version=sessions.c.view_version + 1, **also)
            .returning(sessions.c.view_version)
        )
        version = conn.scalar(stmt)
    else:
        version = conn.scalar(_LOCK_VIEW, {"sid": session_id})
    if version is None:
        raise NotFound(f"no session {session_id}")
    return int(version)


def read_active(conn: Connection, session_id: str) -> list[ChatMessage]:
    stmt = (
        select(*MESSAGE_COLUMNS)
        .where(messages.c.session_id == session_id, messages.c.active)
        .order_by(*ORDER)
    )
    return [to_message(r) for r in conn.execute(stmt).mappings()]


_LAST_SEQ = (
    select(func.max(messages.c.seq)).where(messages.c.session_id == bindparam("sid")).scalar_subquery()
)
_TOP = select(_LAST_SEQ)
# Both lookups in one statement, each on its own index.
_SAME_AND_TOP = select(
    select(messages.c.id)
    .where(messages.c.session_id == bindparam("sid"), messages.c.platform_message_id == bindparam("pmid"))
    .scalar_subquery(),
    _LAST_SEQ,
)
_INSERT = insert(messages).returning(messages.c.id)


def append_row(conn: Connection, session_id: str, stored: ChatMessage) -> tuple[ChatMessage, bool]:
    """Insert ``stored`` at the end of the session (the row already locked); ``(row, created)``:
    the row already there when its platform message id was stored before. The statements are
    built once (building costs more than running them)."""
    if stored.platform_message_id is None:
        found_id = None
        top = conn.scalar(_TOP, {"sid": session_id})
    else:
        found_id, top = conn.execute(
            _SAME_AND_TOP, {"sid": session_id, "pmid": stored.platform_message_id}
        ).one()
    if found_id is not None:
        existing = conn.execute(select(messages).where(messages.c.id == found_id)).mappings().one()
        return to_message(existing), False
    seq = (top or 0) + 1
    new_id = conn.scalar(_INSERT, {**row_values(session_id, stored), "seq": seq})
    estimate = content_tokens(stored.content)
    return replace(stored, id=int(new_id or 0), seq=seq, token_estimate=estimate), True


def row_values(session_id: str, message: ChatMessage) -> dict[str, object]:
    """Column values for a new row holding ``message`` (content already cleaned)."""
    text = content_text(message.content)
    return {
        "session_id": session_id,
        "role": message.role,
        "content": stored_content(message.content, text),
        **search_values(text),
        "kind": message.kind,
        "author_id": message.author_id,
        "author_name": None if message.author_name is None else clean_text(message.author_name),
        "platform_message_id": message.platform_message_id,
        # Kept so that no turn estimates a stored message again (always from the content: a
        # copy with new content must not carry its original's figure).
        "token_estimate": content_tokens(message.content),
        "created_at": message.created_at or utcnow(),
        "active": True,
        "compacted": False,
    }
