"""The in-memory active view (gateway.store.view_cache) never serves a view the database has left.

Each change is made through a SECOND store on the same database (another worker, or an admin
command in another process): the first store's cached view can only learn of it through
``sessions.view_version``. Without the bump in the changing transaction, every test here reads
the stale cached view.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from agent.tokens import content_tokens
from agent.types import ChatMessage, text_block
from gateway.store.db import Database
from gateway.store.message_ops import read_active
from gateway.store.repository import Store
from gateway.store.view_cache import ActiveViews
from tests.store.helpers import append_turns, new_session, summary_plan

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture
async def other(database: Database) -> AsyncIterator[Store]:
    """Another worker: its own engine and its own cache, on the same database."""
    db = Database(database.url)
    await db.connect()
    try:
        yield Store(db)
    finally:
        await db.dispose()


async def from_rows(store: Store, session_id: str) -> list[tuple[int | None, str]]:
    return [(m.id, m.text) for m in await store.db.read_at_once(lambda conn: read_active(conn, session_id))]


def shape(view: list[ChatMessage]) -> list[tuple[int | None, str]]:
    return [(m.id, m.text) for m in view]


async def cached_view(store: Store, session_id: str) -> list[ChatMessage]:
    """The view, read twice: the second read is served from memory (the test makes sure)."""
    await store.load_active(session_id)
    hits = store._views.hits
    view = await store.load_active(session_id)
    assert store._views.hits == hits + 1
    return view


async def assert_coherent(store: Store, session_id: str) -> None:
    """Both ways the worker reads its view agree with the rows: load_active, and append_turn."""
    assert shape(await store.load_active(session_id)) == await from_rows(store, session_id)
    turn = await store.append_turn(session_id, [ChatMessage.user("next question")], at=AT)
    assert shape(turn.view) == await from_rows(store, session_id)


async def test_the_view_is_served_from_memory_while_nothing_changes(store: Store) -> None:
    sid = await new_session(store)
    await append_turns(store, sid, 6)
    view = await cached_view(store, sid)
    assert shape(view) == await from_rows(store, sid)
    turn = await store.append_turn(sid, [ChatMessage.user("and then?")], at=AT)
    assert store._views.hits >= 2
    assert shape(turn.view) == await from_rows(store, sid)
    assert all(m.token_estimate is not None for m in turn.view)


async def test_coherent_after_a_compaction_elsewhere(store: Store, other: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 10)
    await cached_view(store, sid)
    await other.archive_and_summarize(sid, summary_plan(msgs[2:7]))
    await assert_coherent(store, sid)
    assert any(m.kind == "summary" for m in await store.load_active(sid))


async def test_coherent_after_a_restore_elsewhere(store: Store, other: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 10)
    await store.archive_and_summarize(sid, summary_plan(msgs[2:7]))
    await cached_view(store, sid)
    await other.restore_latest_compaction(sid)
    await assert_coherent(store, sid)
    assert not any(m.kind == "summary" for m in await store.load_active(sid))


async def test_coherent_after_an_edit_elsewhere(store: Store, other: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("what I first said", platform_message_id="p1"))
    await append_turns(store, sid, 3)
    await cached_view(store, sid)
    await other.record_edit(sid, "p1", [text_block("what I meant")], at=AT)
    await assert_coherent(store, sid)
    assert (await store.load_active(sid))[0].text == "what I meant"


async def test_coherent_after_an_erase_elsewhere(store: Store, other: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("mine", author_id="u9"))
    await store.append_message(sid, ChatMessage.assistant("an answer"))
    await store.append_message(sid, ChatMessage.user("someone else's", author_id="u2"))
    await cached_view(store, sid)
    await other.erase_user("telegram", "u9")
    await assert_coherent(store, sid)
    assert "mine" not in [m.text for m in await store.load_active(sid)]


async def test_coherent_after_appends_elsewhere(store: Store, other: Store) -> None:
    sid = await new_session(store)
    await append_turns(store, sid, 4)
    await cached_view(store, sid)
    await other.append_message(sid, ChatMessage.user("from the other worker"))
    await assert_coherent(store, sid)


async def test_an_append_here_after_a_change_elsewhere_does_not_extend_the_stale_view(
    store: Store, other: Store
) -> None:
    """Write-through extends only the view it knows to be current: one version behind the append."""
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 10)
    await cached_view(store, sid)
    await other.archive_and_summarize(sid, summary_plan(msgs[1:6]))
    await store.append_message(sid, ChatMessage.user("a question"))
    assert shape(await store.load_active(sid)) == await from_rows(store, sid)


async def test_a_redelivered_message_is_not_added_to_the_view_twice(store: Store) -> None:
    sid = await new_session(store)
    await append_turns(store, sid, 2)
    await cached_view(store, sid)
    first = await store.append_turn(sid, [ChatMessage.user("hi", platform_message_id="d1")], at=AT)
    again = await store.append_turn(sid, [ChatMessage.user("hi", platform_message_id="d1")], at=AT)
    assert [created for _, created in first.stored] == [True]
    assert [created for _, created in again.stored] == [False]
    assert shape(again.view) == shape(first.view) == await from_rows(store, sid)


def test_the_cache_is_bounded_and_forgets_idle_sessions() -> None:
    now = [0.0]
    views = ActiveViews(capacity=2, idle_seconds=60, clock=lambda: now[0])
    for sid in ("a", "b", "c"):
        views.put(sid, 1, [ChatMessage.user(sid)])
    assert len(views) == 2 and views.get("a", 1) is None  # least recently used went first
    now[0] = 120.0
    views.put("d", 1, [ChatMessage.user("d")])
    assert len(views) == 1 and views.get("d", 1) is not None  # idle ones went with it


async def test_a_stored_message_keeps_its_token_estimate_and_an_edit_renews_it(store: Store) -> None:
    """No turn estimates its history again: the estimate is stored with the row, from its content."""
    sid = await new_session(store)
    stored = await store.append_message(sid, ChatMessage.user("short", platform_message_id="e1"))
    assert stored.token_estimate == content_tokens(stored.content)
    await store.record_edit(sid, "e1", [text_block("a much longer text " * 40)], at=AT)
    fresh = Store(store.db)  # nothing in memory: the figures come from the rows
    [row] = await fresh.load_active(sid)
    assert row.token_estimate == content_tokens([text_block("a much longer text " * 40)])
    assert row.with_content([text_block("x")]).token_estimate is None  # new content, no old figure


async def test_a_session_still_at_view_version_zero_loads_its_rows(store: Store, other: Store) -> None:
    # Sessions from before view versions (and bulk loads) have rows at version 0.
    sid = await new_session(store)
    await append_turns(store, sid, 2)
    async with store.db.transaction() as s:
        await s.execute(text("UPDATE sessions SET view_version = 0 WHERE id = :sid"), {"sid": sid})
    assert shape(await other.load_active(sid)) == await from_rows(store, sid) != []


async def test_an_unknown_session_has_an_empty_view(store: Store) -> None:
    assert await store.load_active("no-such-session") == []
