"""Sessions: one current per key, ending, listing, counts, context state."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from agent.errors import NotFound
from agent.types import ContextState
from gateway.store.repository import Store
from tests.store.helpers import append_turns, new_session, summary_plan


async def test_get_or_create_returns_the_current_session_for_the_key(store: Store) -> None:
    first = await store.get_or_create_session(
        "tg:5", platform="telegram", chat_id="5", system_prompt="frozen", model="m1"
    )
    again = await store.get_or_create_session(
        "tg:5", platform="telegram", chat_id="5", system_prompt="changed", model="m2"
    )
    assert again == first and again.system_prompt == "frozen"
    assert first.created_at.tzinfo is not None and first.version == 1


async def test_concurrent_get_or_create_makes_one_session(store: Store) -> None:
    infos = await asyncio.gather(
        *(
            store.get_or_create_session("k", platform="p", chat_id="c", system_prompt="s", model="m")
            for _ in range(6)
        )
    )
    assert len({i.id for i in infos}) == 1


async def test_ending_a_session_makes_the_key_start_a_new_one(store: Store) -> None:
    old = await new_session(store, "k")
    await store.end_session(old, "idle")
    ended = await store.get_session(old)
    assert ended.ended_at is not None and ended.end_reason == "idle"
    assert await store.current_session("k") is None
    new = await new_session(store, "k")
    assert new != old
    assert (await store.current_session("k")) == await store.get_session(new)


async def test_touch_updates_last_activity_and_bumps_version(store: Store) -> None:
    sid = await new_session(store)
    at = datetime(2030, 5, 6, 7, 8, 9, tzinfo=UTC)
    await store.touch_session(sid, at)
    info = await store.get_session(sid)
    assert info.last_activity_at == at and info.version == 2


async def test_get_missing_session_raises_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.get_session("missing")
    with pytest.raises(NotFound):
        await store.end_session("missing", "x")


async def test_list_sessions_counts_messages_and_compactions(store: Store) -> None:
    a = await new_session(store, "a", platform="telegram")
    b = await new_session(store, "b", platform="discord")
    msgs = await append_turns(store, a, 6)
    await store.archive_and_summarize(a, summary_plan(msgs[1:4]))
    await store.touch_session(b, datetime(2000, 1, 1, tzinfo=UTC))
    await store.end_session(b, "reset")

    listed = await store.list_sessions()
    assert [s.id for s in listed] == [a, b]  # most recently active first
    assert (listed[0].active, listed[0].archived, listed[0].compactions) == (4, 3, 1)
    assert [s.id for s in await store.list_sessions(platform="discord")] == [b]
    assert [s.id for s in await store.list_sessions(include_ended=False)] == [a]
    assert [s.id for s in await store.list_sessions(limit=1, offset=1)] == [b]
    assert await store.message_counts(a) == (4, 3)


async def test_context_state_round_trips(store: Store) -> None:
    sid = await new_session(store)
    assert await store.load_context_state(sid) == ContextState()
    state = ContextState(
        last_prompt_tokens=1234,
        last_prompt_at=datetime(2026, 2, 3, 4, 5, 6, tzinfo=UTC),
        token_scale=1.3,
        cooldown_until=datetime(2026, 2, 3, 5, 0, tzinfo=UTC),
        consecutive_failures=2,
        extra={"note": "a\x00b"},
    )
    await store.save_context_state(sid, state)
    loaded = await store.load_context_state(sid)
    assert loaded == replace(state, extra={"note": "ab"})
    info = await store.get_session(sid)
    assert (info.last_prompt_tokens, info.last_prompt_at) == (1234, state.last_prompt_at)


async def test_concurrent_state_saves_all_land_without_error(store: Store) -> None:
    sid = await new_session(store)
    await asyncio.gather(
        *(store.save_context_state(sid, ContextState(consecutive_failures=i)) for i in range(5))
    )
    assert (await store.load_context_state(sid)).consecutive_failures in range(5)
    assert (await store.get_session(sid)).version == 6
