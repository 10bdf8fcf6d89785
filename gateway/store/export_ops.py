"""A session whole, as rows (every message, archived ones too, and its compactions), and back.

The export keeps every column that makes the conversation: order (``seq``, ``sub_seq``),
state (``active``, ``compacted``), which compaction archived or produced each row, and the
edit history. Import writes it into a database that does not hold that session yet; message
ids are new there, and every reference to one (a compaction's summary and first kept
message) follows. The rows come validated (``gateway.admin.import_rows``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import insert, select, update

from agent.clock import utcnow
from agent.errors import NotFound, StoreError
from gateway.store.base import Repo, chunks
from gateway.store.columns import clean_json
from gateway.store.convert import content_of, stored_content
from gateway.store.message_ops import ORDER
from gateway.store.models import compactions, messages, sessions

EXPORT_CHUNK = 2000
_SKIPPED = {"text_tsv"}
_SESSION_COLUMNS = tuple(c.name for c in sessions.c if c.name not in _SKIPPED)
_COMPACTION_COLUMNS = tuple(c.name for c in compactions.c)
_MESSAGE_COLUMNS = tuple(c.name for c in messages.c if c.name not in _SKIPPED)


@dataclass(slots=True)
class SessionExport:
    """Rows as column -> value (datetimes as datetimes; the caller serializes)."""

    session: dict[str, Any]
    compactions: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)


def _pick(row: Mapping[Any, Any], columns: tuple[str, ...]) -> dict[str, Any]:
    return {name: row[name] for name in columns if name in row}


class ExportOps(Repo):
    async def export_session(self, session_id: str) -> SessionExport:
        """The session, its compactions in order, and every message in transcript order."""
        async with self._tx(write=False) as s:
            row = (await s.execute(select(sessions).where(sessions.c.id == session_id))).mappings().first()
            if row is None:
                raise NotFound(f"no session {session_id}")
            out = SessionExport(session=_pick(row, _SESSION_COLUMNS))
            done = await s.execute(
                select(compactions)
                .where(compactions.c.session_id == session_id)
                .order_by(compactions.c.number)
            )
            out.compactions = [_pick(r, _COMPACTION_COLUMNS) for r in done.mappings()]
            cols = [messages.c[name] for name in _MESSAGE_COLUMNS]
            after: tuple[int, int] | None = None
            while True:  # keyset pages: a long session never sits in one result set
                stmt = select(*cols).where(messages.c.session_id == session_id)
                if after is not None:
                    seq, sub = after
                    stmt = stmt.where(
                        (messages.c.seq > seq) | ((messages.c.seq == seq) & (messages.c.sub_seq > sub))
                    )
                page = (await s.execute(stmt.order_by(*ORDER).limit(EXPORT_CHUNK))).mappings().all()
                out.messages += [{**r, "content": content_of(r)} for r in page]
                if len(page) < EXPORT_CHUNK:
                    break
                after = (int(page[-1]["seq"]), int(page[-1]["sub_seq"]))
        return out

    async def import_session(self, data: SessionExport, *, replace: bool = False) -> str:
        """Write an exported session into this database, in one transaction; its id.

        StoreError when the session is already here, when the export does not hold together, or
        when it is current and its chat has a live session here: that chat's next message would
        land in one or the other. ``replace`` ends the live one (reason ``replaced``) instead.
        """
        session_id = str(data.session.get("id") or "")
        key = str(data.session.get("key") or "")
        replaced: str | None = None
        async with self._tx() as s:
            if await s.scalar(select(sessions.c.id).where(sessions.c.id == session_id)) is not None:
                raise StoreError(f"session {session_id} is already in this database")
            known = [str(c["id"]) for c in data.compactions]
            known_ids = set(known)
            for part in chunks(known):
                taken = await s.scalar(select(compactions.c.id).where(compactions.c.id.in_(part)).limit(1))
                if taken is not None:
                    raise StoreError(f"compaction {taken} is already in this database")
            if data.session.get("ended_at") is None:
                replaced = await s.scalar(
                    select(sessions.c.id).where(sessions.c.key == key, sessions.c.ended_at.is_(None))
                )
            if replaced is not None:
                if not replace:
                    raise StoreError(
                        f"the chat {key} has a live session here ({replaced}); importing would take its "
                        "place: pass --replace to end it and make the imported one current"
                    )
                await s.execute(
                    update(sessions)
                    .where(sessions.c.id == replaced)
                    .values(ended_at=utcnow(), end_reason="replaced", version=sessions.c.version + 1)
                )
            await s.execute(insert(sessions).values(**_pick(data.session, _SESSION_COLUMNS)))
            for c in data.compactions:
                if c.get("session_id") != session_id:
                    raise StoreError(f"compaction {c.get('id')} belongs to another session")
                values = {**_pick(c, _COMPACTION_COLUMNS), "summary_message_id": None, "first_kept_id": None}
                await s.execute(insert(compactions).values(**values))
            new_ids: dict[int, int] = {}
            for m in data.messages:
                for ref in ("compaction_id", "produced_by"):
                    if m.get(ref) is not None and m[ref] not in known_ids:
                        raise StoreError(f"message {m.get('id')} names an unknown compaction {m[ref]}")
                values = {k: v for k, v in _pick(m, _MESSAGE_COLUMNS).items() if k != "id"}
                content = clean_json(values.get("content") or [])
                text = str(values.get("text", ""))
                values.update(session_id=session_id, content=stored_content(content, text))
                new_id = await s.scalar(insert(messages).values(**values).returning(messages.c.id))
                new_ids[int(m["id"])] = int(new_id or 0)
            for c in data.compactions:
                refs = {k: new_ids.get(c[k]) for k in ("summary_message_id", "first_kept_id") if c.get(k)}
                if refs:
                    await s.execute(update(compactions).where(compactions.c.id == c["id"]).values(**refs))
        if replaced is not None:
            self._views.drop(replaced)
        return session_id
