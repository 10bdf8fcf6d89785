"""Streamed replies in SQL: an open stream, its delivery as an already-sent outbox row, upkeep."""

from __future__ import annotations

from datetime import timedelta

from agent.clock import utcnow
from gateway.store.repository import Store
from tests.store.helpers import new_session

TARGET = {"platform": "telegram", "chat_id": "42", "thread_id": None, "reply_to_message_id": "7"}


async def test_an_open_stream_remembers_what_each_message_shows(store: Store) -> None:
    session_id = await new_session(store)
    stream_id = await store.stream_open(session_id=session_id, target=TARGET)
    await store.stream_update(stream_id, message_ids=["42:8"], shown=["Half an ans"])
    [open_stream] = await store.streams_open()
    assert (open_stream.id, open_stream.message_ids, open_stream.shown) == (
        stream_id,
        ["42:8"],
        ["Half an ans"],
    )


async def test_delivering_a_stream_records_the_reply_as_sent_with_the_streamed_ids(store: Store) -> None:
    session_id = await new_session(store)
    inbox_id, _ = await store.inbox_put(
        platform="telegram",
        chat_id="42",
        platform_message_id="7",
        session_key="k",
        payload={},
        addressed=True,
    )
    stream_id = await store.stream_open(session_id=session_id, target=TARGET)
    outbox_id = await store.stream_deliver(
        stream_id, text="The whole answer.", message_ids=["42:8"], inbox_ids=[inbox_id], message_id=None
    )
    row = await store.outbox_get(outbox_id)
    assert (row.status, row.text, row.delivered_ids, row.inbox_ids) == (
        "sent",
        "The whole answer.",
        ["42:8"],
        [inbox_id],
    )
    assert await store.outbox_for_inbox(inbox_id) == row
    assert await store.streams_open() == []
    assert (
        await store.outbox_claim(now=utcnow(), lease_seconds=60, platforms=["telegram"]) == []
    )  # never resent


async def test_upkeep_prunes_finished_streams_only(store: Store) -> None:
    session_id = await new_session(store)
    done = await store.stream_open(session_id=session_id, target=TARGET)
    await store.stream_close(done)
    still_open = await store.stream_open(session_id=session_id, target=TARGET)
    report = await store.prune_finished(before=utcnow() + timedelta(days=1))
    assert report["streams_pruned"] == 1
    assert [s.id for s in await store.streams_open()] == [still_open]
