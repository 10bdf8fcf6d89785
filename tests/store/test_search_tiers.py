"""Newest-first reading in widening id ranges (PostgreSQL's way) finds what one query finds."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Connection

from agent.types import ChatMessage, SearchFilters
from gateway.store.repository import Store
from gateway.store.search_query import parse
from gateway.store.search_sql import IdRange, PostgresSearch, Query, SqliteSearch
from gateway.store.search_tiers import newest
from tests.store.helpers import new_session


class Ranged(SqliteSearch):
    """SQLite's statements read the PostgreSQL way, to test the ranges on both engines."""

    scan_by_ranges = True


@pytest.mark.parametrize("need", [1, 3, 7, 50])
@pytest.mark.parametrize("below", [None, 40])
@pytest.mark.parametrize("query", ["plum", "fig", "nothing"])  # dense, sparse (under 2%), absent
async def test_widening_ranges_find_the_same_newest_rows_as_one_query(
    store: Store, need: int, below: int | None, query: str
) -> None:
    sid = await new_session(store)
    for i in range(120):
        word = "fig" if i in (7, 90) else "plum" if i % 3 else "pear"
        await store.append_message(sid, ChatMessage.user(f"{word} number {i}"))
    ranged = Ranged() if store.db.dialect == "sqlite" else PostgresSearch()
    plain = SqliteSearch() if store.db.dialect == "sqlite" else PostgresSearch()
    parsed = parse(query)

    def words_of(sql: Any) -> Any:
        def statement(ids: IdRange, limit: int) -> Query | None:
            return sql.words(parsed, SearchFilters(), ids, limit=limit)

        return statement

    def both(conn: Connection) -> tuple[Any, Any]:
        top = 120  # the highest id
        got = newest(conn, ranged, words_of(ranged), need, below=below, top=top, first_span=2)
        query = words_of(plain)(IdRange(below=below), need)
        assert query is not None
        return got, query.rows(conn)

    got, expected = await store.db.read_at_once(both)
    assert [r[0] for r in got] == [r[0] for r in expected]
