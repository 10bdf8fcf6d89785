"""How many hits a search has in all (``count_hits``), and sessions found by the start of their id."""

from __future__ import annotations

from agent.types import ChatMessage, SearchFilters
from gateway.store.repository import Store
from tests.store.helpers import new_session

ALL = SearchFilters()


async def _messages(store: Store, session_id: str, texts: list[str]) -> None:
    for text in texts:
        await store.append_message(session_id, ChatMessage.user(text))


async def test_the_count_is_every_hit_a_search_finds_words_and_fragments_alike(store: Store) -> None:
    sid = await new_session(store)
    await _messages(store, sid, [f"the zanzibar plan {n}" for n in range(7)])
    await _messages(store, sid, ["zanzibarian food", "nothing here", "plain text"])  # a fragment match
    every = await store.search("zanzibar", ALL, limit=100)
    assert len(every) == 8 and any(h.substring for h in every)
    assert await store.count_hits("zanzibar", ALL, cap=100) == 8


async def test_the_count_stops_past_the_cap(store: Store) -> None:
    sid = await new_session(store)
    await _messages(store, sid, [f"zanzibar {n}" for n in range(12)])
    assert await store.count_hits("zanzibar", ALL, cap=5) == 6  # "more than 5"


async def test_the_count_follows_the_filters(store: Store) -> None:
    one, two = await new_session(store, key="test:a"), await new_session(store, key="test:b")
    await _messages(store, one, ["zanzibar one", "zanzibar two"])
    await _messages(store, two, ["zanzibar three"])
    assert await store.count_hits("zanzibar", SearchFilters(session_id=two), cap=100) == 1


async def test_a_query_with_nothing_to_look_for_counts_nothing(store: Store) -> None:
    assert await store.count_hits('"" -', ALL, cap=100) == 0


async def test_sessions_are_found_by_the_start_of_their_id(store: Store) -> None:
    ids = [await new_session(store, key=f"test:{n}") for n in range(17)]
    target = ids[3]
    found, total = await store.sessions_by_prefix(target[:12].upper())
    assert ([s.id for s in found], total) == ([target], 1)
    assert await store.sessions_by_prefix("%") == ([], 0)  # LIKE wildcards are literal
    assert await store.sessions_by_prefix("  ") == ([], 0)
    first = next(c for c in (i[0] for i in ids) if sum(i.startswith(c) for i in ids) > 1)
    sharing = {i for i in ids if i.startswith(first)}
    found, total = await store.sessions_by_prefix(first, limit=1)
    assert total == len(sharing) and len(found) == 1 and found[0].id in sharing
