"""SQLite and PostgreSQL return the same hits, in the same order, for every query and order."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from agent.types import ChatMessage, SearchFilters
from gateway.store.db import Database
from gateway.store.repository import Store
from tests.conftest import _postgres_schema, migrated
from tests.store.engines import POSTGRES_URL
from tests.store.helpers import new_session
from tests.store.search_corpus import QUERIES, mixed_messages

pytestmark = pytest.mark.skipif(not POSTGRES_URL, reason="needs HYGIEIA_TEST_POSTGRES_URL")

MORE = ["deploy", "the deploy", '"the logs"', "err*", "config -deploy", "数据 -日志", "userprofile -crash"]


@pytest.fixture
async def both(tmp_path: Path) -> AsyncIterator[tuple[Store, Store]]:
    assert POSTGRES_URL is not None
    schema = f"test_{uuid.uuid4().hex[:16]}"
    await _postgres_schema("CREATE", schema)
    pg_url = make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    urls = [f"sqlite+aiosqlite:///{tmp_path / 'h.db'}", pg_url.render_as_string(hide_password=False)]
    databases = []
    try:
        for url in urls:
            await migrated(url, tmp_path)
            databases.append(Database(url))
            await databases[-1].connect()
        yield Store(databases[0]), Store(databases[1])
    finally:
        for db in databases:
            await db.dispose()
        await _postgres_schema("DROP", schema)


async def test_both_engines_return_the_same_hits_in_the_same_order(both: tuple[Store, Store]) -> None:
    texts = mixed_messages(400, seed=3)
    for store in both:
        sid = await new_session(store)
        for text in texts:
            await store.append_message(sid, ChatMessage.user(text))
        store.rank_window = 40  # exercise the window and what follows it
    sqlite, postgres = both
    for query in [*QUERIES, *MORE]:
        for sort in ("relevance", "recent"):
            left = await sqlite.search(query, SearchFilters(), limit=500, sort=sort)  # type: ignore[arg-type]
            right = await postgres.search(query, SearchFilters(), limit=500, sort=sort)  # type: ignore[arg-type]
            assert [(h.message_id, h.substring) for h in left] == [
                (h.message_id, h.substring) for h in right
            ], (
                query,
                sort,
            )
            assert [h.snippet for h in left] == [h.snippet for h in right], (query, sort)
