"""Retention on every engine: archived messages older than N days go, with their search entries;
active messages and summaries never do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, update

from agent.errors import NotFound
from agent.types import ChatMessage, SearchFilters
from gateway.jobs.retention import Retention
from gateway.store.models import messages
from gateway.store.repository import Store
from tests.store.helpers import append_turns, new_session, summary_plan

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=400)


async def age(store: Store, rows: list[ChatMessage], at: datetime) -> None:
    async with store.db.transaction() as s:
        ids = [m.id for m in rows]
        await s.execute(update(messages).where(messages.c.id.in_(ids)).values(created_at=at))


async def counts(store: Store, session_id: str) -> dict[str, int]:
    """Rows by state: active, archived messages, summaries (any state)."""
    async with store.db.engine.connect() as conn:
        rows = await conn.execute(
            select(messages.c.active, messages.c.kind, func.count())
            .where(messages.c.session_id == session_id)
            .group_by(messages.c.active, messages.c.kind)
        )
        out = {"active": 0, "archived": 0, "summaries": 0}
        for active, kind, n in rows:
            if kind == "summary":
                out["summaries"] += int(n)
            elif active:
                out["active"] += int(n)
            else:
                out["archived"] += int(n)
        return out


async def test_retention_deletes_old_archived_messages_and_keeps_active_rows_and_summaries(
    store: Store,
) -> None:
    sid = await new_session(store)
    old = await append_turns(store, sid, 10, prefix="ancient zebra")
    await age(store, old, OLD)
    # Compaction 1 archives six old messages; compaction 2 archives its summary and two more
    # old ones: every message either archived is old.
    await store.archive_and_summarize(sid, summary_plan(old[0:6], "first summary of zebra talk"))
    view = await store.load_active(sid)
    await store.archive_and_summarize(sid, summary_plan(view[0:3], "second summary of zebra talk"))
    recent = await append_turns(store, sid, 6, prefix="recent yak")
    await store.archive_and_summarize(sid, summary_plan(recent[0:4], "summary of yak talk"))
    before = await counts(store, sid)
    active_view = await store.load_active(sid)

    report = await Retention(365, store).run(NOW)

    after = await counts(store, sid)
    assert report == {"messages_deleted": 8, "compactions_pruned": 2}
    assert before == {"active": 4, "archived": 12, "summaries": 3}
    assert after == {"active": 4, "archived": 4, "summaries": 3}  # only the recent compaction's rows stay
    assert await store.load_active(sid) == active_view
    zebra = {hit.message_id for hit in await store.search("zebra", SearchFilters(session_id=sid))}
    assert zebra.isdisjoint(m.id for m in old[0:8])  # the index forgot the deleted rows
    assert len(zebra) == 4  # the two old messages still active, and both summaries
    assert len(await store.search("yak", SearchFilters(session_id=sid, state="archived"))) == 4


async def test_a_compaction_with_any_recent_message_is_kept_whole(store: Store) -> None:
    sid = await new_session(store)
    turns = await append_turns(store, sid, 8)
    await age(store, turns[0:3], OLD)  # the fourth archived one is recent
    await store.archive_and_summarize(sid, summary_plan(turns[0:4]))

    report = await Retention(365, store).run(NOW)

    assert report == {"messages_deleted": 0, "compactions_pruned": 0}
    assert (await counts(store, sid))["archived"] == 4


async def test_old_active_messages_are_never_deleted(store: Store) -> None:
    sid = await new_session(store)
    turns = await append_turns(store, sid, 6)
    await age(store, turns, OLD)

    assert await Retention(1, store).run(NOW) == {"messages_deleted": 0, "compactions_pruned": 0}
    assert len(await store.load_active(sid)) == 6


async def test_a_compaction_whose_messages_were_deleted_cannot_be_undone(store: Store) -> None:
    sid = await new_session(store)
    turns = await append_turns(store, sid, 8)
    await age(store, turns, OLD)
    await store.archive_and_summarize(sid, summary_plan(turns[0:4]))
    await Retention(365, store).run(NOW)
    view = await store.load_active(sid)

    with pytest.raises(NotFound, match="retention policy"):
        await store.restore_latest_compaction(sid)
    assert await store.load_active(sid) == view  # the summary still stands in for them
