"""The reads behind the admin API: health probe, paged transcript, context series, totals."""

from __future__ import annotations

import pytest

from agent.errors import NotFound
from agent.types import Usage, UsageRecord
from gateway.store.db import Database
from gateway.store.repository import Store
from tests.store.helpers import append_turns, ids, new_session, summary_plan


async def test_ping_is_true_on_a_migrated_database(store: Store) -> None:
    assert await store.ping() is True


async def test_ping_is_false_on_a_database_without_the_schema(db_url: str) -> None:
    async with Database(db_url) as db:
        assert await Store(db).ping() is False


async def test_messages_page_filters_by_state_and_pages_in_order(store: Store) -> None:
    sid = await new_session(store)
    turns = await append_turns(store, sid, 6)
    await store.archive_and_summarize(sid, summary_plan(turns[1:4]))

    everything = await store.messages_page(sid, state="all", limit=100)
    assert everything.total == 7
    # The summary sits right after the first row it archived.
    assert [m.text for m in everything.messages][:4] == [
        "message 0",
        "message 1",
        "summary of the middle",
        "message 2",
    ]

    archived = await store.messages_page(sid, state="archived")
    assert ids(archived.messages) == ids(turns[1:4]) and archived.total == 3
    active = await store.messages_page(sid, state="active", offset=1, limit=2)
    assert active.total == 4 and active.offset == 1
    assert [m.kind for m in active.messages] == ["summary", "message"]


async def test_messages_page_with_limit_zero_only_counts(store: Store) -> None:
    sid = await new_session(store)
    await append_turns(store, sid, 3)
    page = await store.messages_page(sid, limit=0)
    assert (page.total, page.messages) == (3, [])


async def test_context_series_is_chat_calls_oldest_first_with_full_prompt_size(store: Store) -> None:
    sid = await new_session(store)
    await store.record_usage(sid, UsageRecord("m", "chat", Usage(100, 5, 200, 300), 0.1))
    await store.record_usage(sid, UsageRecord("h", "summary", Usage(9000, 5), 0.1))
    await store.record_usage(sid, UsageRecord("m", "chat", Usage(50, 5, 0, 700), 0.1, estimated=True))
    series = await store.context_series(sid)
    assert [(p.prompt_tokens, p.estimated) for p in series] == [(600, False), (750, True)]
    assert series[0].at <= series[1].at and series[0].at.tzinfo is not None


async def test_context_series_keeps_the_latest_calls_when_limited(store: Store) -> None:
    sid = await new_session(store)
    for n in range(5):
        await store.record_usage(sid, UsageRecord("m", "chat", Usage(n), 0.0))
    assert [p.prompt_tokens for p in await store.context_series(sid, limit=2)] == [3, 4]


async def test_store_totals_count_sessions_messages_and_compactions_by_trigger(store: Store) -> None:
    assert (await store.store_totals()).compactions_by_trigger == {}
    first = await new_session(store, "telegram:1")
    second = await new_session(store, "telegram:2", chat_id="2")
    await store.end_session(second, "reset")
    turns = await append_turns(store, first, 6)
    await store.archive_and_summarize(first, summary_plan(turns[:2], trigger="hygiene"))
    await store.archive_and_summarize(first, summary_plan(turns[2:4], trigger="manual"))

    totals = await store.store_totals()
    assert (totals.sessions_current, totals.sessions_ended) == (1, 1)
    assert (totals.messages_active, totals.messages_archived) == (4, 4)
    assert totals.compactions_by_trigger == {"hygiene": 1, "manual": 1}


async def test_message_position_counts_rows_before_it_in_order(store: Store) -> None:
    sid = await new_session(store)
    turns = await append_turns(store, sid, 5)
    await store.archive_and_summarize(sid, summary_plan(turns[1:3]))
    summary = next(m for m in (await store.messages_page(sid)).messages if m.kind == "summary")
    assert summary.id is not None and turns[3].id is not None
    assert await store.message_position(sid, summary.id) == 2
    assert await store.message_position(sid, turns[3].id) == 4


async def test_message_position_of_a_message_of_another_session_is_not_found(store: Store) -> None:
    sid = await new_session(store)
    other = await new_session(store, "telegram:2", chat_id="2")
    [turn] = await append_turns(store, other, 1)
    assert turn.id is not None
    with pytest.raises(NotFound):
        await store.message_position(sid, turn.id)


async def test_ping_is_false_once_the_database_is_closed(database: Database) -> None:
    store = Store(database)
    await database.dispose()
    assert await store.ping() is False


@pytest.mark.parametrize("offset", [0, 3, 5, 6, 9, 10, 11, 20])
async def test_messages_page_is_the_same_read_from_either_end(store: Store, offset: int) -> None:
    sid = await new_session(store)
    turns = await append_turns(store, sid, 11)
    page = await store.messages_page(sid, offset=offset, limit=4)
    assert ids(page.messages) == ids(turns)[offset : offset + 4] and page.total == 11
