"""SQLite's search statements are built once per shape and run with each search's values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.types import ChatMessage, SearchFilters
from gateway.store.repository import Store
from gateway.store.search_query import parse
from gateway.store.search_sql import EVERY_ID, IdRange, SqliteSearch
from tests.store.helpers import new_session


def test_searches_of_one_shape_share_one_statement_with_their_own_values() -> None:
    sql = SqliteSearch()
    first = sql.words(parse("plum"), SearchFilters(session_id="a"), EVERY_ID, limit=5)
    second = sql.words(parse("fig -pear"), SearchFilters(session_id="b"), EVERY_ID, limit=9)
    assert first is not None and second is not None
    assert first.statement is second.statement
    assert (first.params["f_session_id"], first.params["limit"]) == ("a", 5)
    assert (second.params["f_session_id"], second.params["limit"]) == ("b", 9)
    assert first.params["words"] != second.params["words"]


def test_another_filter_or_bound_gets_a_statement_of_its_own() -> None:
    sql = SqliteSearch()
    plain = sql.words(parse("plum"), SearchFilters(), EVERY_ID, limit=5)
    filtered = sql.words(parse("plum"), SearchFilters(user_id="u"), EVERY_ID, limit=5)
    bounded = sql.words(parse("plum"), SearchFilters(), IdRange(below=10), limit=5)
    assert plain is not None and filtered is not None and bounded is not None
    assert len({id(q.statement) for q in (plain, filtered, bounded)}) == 3
    assert bounded.params["below"] == 10


async def test_a_search_after_another_of_the_same_shape_finds_only_its_own_rows(store: Store) -> None:
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    ids: dict[int, int | None] = {}
    for day in (0, 2):
        sid = await new_session(store, f"telegram:{day}", chat_id=str(day))
        text = f"plum pudding and getPlumJam on day {day}"
        ids[day] = (
            await store.append_message(sid, ChatMessage.user(text, created_at=t0 + timedelta(days=day)))
        ).id
    for day in (0, 2):
        when = SearchFilters(since=t0 + timedelta(days=day), until=t0 + timedelta(days=day, hours=1))
        for query in ("plum", "lumja"):  # the words tier, then the substring tier
            assert [h.message_id for h in await store.search(query, when)] == [ids[day]], (day, query)
