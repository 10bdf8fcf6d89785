"""append_message: order, idempotency, concurrency, and what is stored."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from agent.errors import NotFound
from agent.types import ChatMessage
from gateway.store.repository import Store
from tests.store.helpers import append_turns, new_session


async def test_append_assigns_increasing_seq_and_returns_ids(store: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 3)
    assert [m.seq for m in msgs] == [1, 2, 3]
    assert all(m.id is not None and m.active and not m.compacted for m in msgs)
    assert await store.load_active(sid) == msgs


async def test_sessions_number_their_messages_independently(store: Store) -> None:
    a, b = await new_session(store, "a"), await new_session(store, "b")
    await append_turns(store, a, 2)
    [first_b] = await append_turns(store, b, 1)
    assert first_b.seq == 1


async def test_duplicate_platform_message_id_is_stored_once(store: Store) -> None:
    sid = await new_session(store)
    first = await store.append_message(sid, ChatMessage.user("hi", platform_message_id="42"))
    again = await store.append_message(sid, ChatMessage.user("hi (redelivered)", platform_message_id="42"))
    assert again.id == first.id and again.text == "hi"
    assert len(await store.load_active(sid)) == 1


async def test_concurrent_appends_get_distinct_consecutive_seqs(store: Store) -> None:
    sid = await new_session(store)
    results = await asyncio.gather(*(store.append_message(sid, ChatMessage.user(f"m{i}")) for i in range(20)))
    assert sorted(m.seq or 0 for m in results) == list(range(1, 21))
    assert len(await store.load_active(sid)) == 20


async def test_concurrent_duplicates_are_stored_once(store: Store) -> None:
    sid = await new_session(store)
    results = await asyncio.gather(
        *(store.append_message(sid, ChatMessage.user("same", platform_message_id="7")) for _ in range(8))
    )
    assert len({m.id for m in results}) == 1
    assert len(await store.load_active(sid)) == 1


async def test_nul_bytes_are_stripped_from_text_and_content(store: Store) -> None:
    sid = await new_session(store)
    content: list[dict[str, Any]] = [
        {"type": "text", "text": "a\x00b"},
        {"type": "tool_use", "id": "t1", "name": "x", "input": {"k\x00": ["v\x00"]}},
    ]
    stored = await store.append_message(sid, ChatMessage(role="assistant", content=content))
    loaded = await store.get_message(stored.id or 0)
    assert loaded.content[0]["text"] == "ab"
    assert loaded.content[1]["input"] == {"k": ["v"]}
    assert "\x00" not in loaded.text


async def test_lone_surrogates_are_replaced_not_refused(store: Store) -> None:
    sid = await new_session(store)
    stored = await store.append_message(sid, ChatMessage.user("broken \ud800 emoji"))
    loaded = await store.get_message(stored.id or 0)
    assert loaded.text == "broken ? emoji" and loaded.content == [{"type": "text", "text": "broken ? emoji"}]


async def test_content_blocks_round_trip(store: Store) -> None:
    sid = await new_session(store)
    content: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "ok ✓ 日本"}]},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
    ]
    stored = await store.append_message(sid, ChatMessage(role="user", content=content, author_name="Ann"))
    loaded = await store.get_message(stored.id or 0)
    assert loaded.content == content and loaded.author_name == "Ann"
    assert loaded.text == "ok ✓ 日本\n[image]"


async def test_created_at_is_timezone_aware_utc(store: Store) -> None:
    sid = await new_session(store)
    given = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    stored = await store.append_message(sid, ChatMessage.user("x", created_at=given))
    loaded = await store.get_message(stored.id or 0)
    assert (
        loaded.created_at == given and loaded.created_at is not None and loaded.created_at.tzinfo is not None
    )


async def test_append_to_missing_session_raises_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.append_message("0" * 32, ChatMessage.user("x"))


async def test_get_missing_message_raises_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.get_message(123456)
