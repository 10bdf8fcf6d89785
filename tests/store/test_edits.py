"""record_edit: a stored message follows its platform edit; the first version is kept."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select

from agent.types import ChatMessage, SearchFilters, text_block
from gateway.store.models import messages
from gateway.store.repository import Store
from tests.store.helpers import append_turns, new_session, summary_plan

AT = datetime(2026, 11, 29, 12, tzinfo=UTC)


async def _append(store: Store, sid: str, text: str, pmid: str) -> ChatMessage:
    return await store.append_message(sid, ChatMessage.user(text, platform_message_id=pmid))


async def test_an_edit_replaces_the_text_and_keeps_the_first_version(store: Store) -> None:
    sid = await new_session(store)
    stored = await _append(store, sid, "walrus at noon", "p1")
    await store.record_edit(sid, "p1", [text_block("walrus at one")], at=AT)
    await store.record_edit(sid, "p1", [text_block("narwhal at two")], at=AT)

    [active] = await store.load_active(sid)
    assert (active.id, active.text) == (stored.id, "narwhal at two")
    async with store.db.transaction(write=False) as s:
        row = (await s.execute(select(messages).where(messages.c.id == stored.id))).mappings().one()
    assert row["original_content"] == [text_block("walrus at noon")]
    assert row["edited_at"] == AT


async def test_search_follows_the_edit(store: Store) -> None:
    sid = await new_session(store)
    await _append(store, sid, "walrus", "p1")
    await store.record_edit(sid, "p1", [text_block("narwhal")], at=AT)

    assert await store.search("walrus", SearchFilters(session_id=sid)) == []
    assert len(await store.search("narwhal", SearchFilters(session_id=sid))) == 1


async def test_an_edit_of_an_archived_message_keeps_it_archived(store: Store) -> None:
    sid = await new_session(store)
    first = await _append(store, sid, "walrus", "p1")
    rest = await append_turns(store, sid, 3)
    await store.archive_and_summarize(sid, summary_plan([first, rest[0]]))
    edited = await store.record_edit(sid, "p1", [text_block("narwhal")], at=AT)

    assert edited is not None and not edited.active and edited.compacted
    hits = await store.search("narwhal", SearchFilters(session_id=sid, state="archived"))
    assert [h.message_id for h in hits] == [first.id]


async def test_an_edit_of_an_unknown_message_changes_nothing(store: Store) -> None:
    sid = await new_session(store)
    await _append(store, sid, "walrus", "p1")
    assert await store.record_edit(sid, "nope", [text_block("x")], at=AT) is None
    assert [m.text for m in await store.load_active(sid)] == ["walrus"]
