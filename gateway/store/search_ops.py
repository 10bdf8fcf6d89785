"""Full-text search over every message, active and archived, in any script.

A query (:mod:`gateway.store.search_query`) is answered in two tiers: **words** (and CJK
words found character by character), then **substrings** of three characters or more
for what the words tier missed. The order is

- ``relevance`` (default): words-tier hits by a BM25 score (:mod:`gateway.store.search_rank`)
  — among the newest :data:`~gateway.store.search_rank.RANK_WINDOW` matches when there are
  more, older ones following newest first — then substring-only hits, newest first;
- ``recent``: words-tier hits newest first, then substring-only hits newest first.

Both orders return the same set of hits, and the same order on both engines. Phase one
finds the ids of the page (:mod:`gateway.store.search_tiers`, with the statements of
:mod:`gateway.store.search_sql`); phase two reads those rows and cuts their snippets
(:mod:`gateway.store.search_snippet`).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, RowMapping, bindparam, func, select, text

from agent.types import SearchFilters, SearchHit, SearchSort
from gateway.store.base import Repo, chunks
from gateway.store.models import messages
from gateway.store.search_index import INDEX_CHARS
from gateway.store.search_query import ParsedQuery, parse
from gateway.store.search_rank import RANK_WINDOW
from gateway.store.search_snippet import make_snippet
from gateway.store.search_sql import PostgresSearch, SearchSql, SqliteSearch
from gateway.store.search_tiers import Found, find

_HIT_COLUMNS = (
    messages.c.id,
    messages.c.session_id,
    messages.c.seq,
    messages.c.role,
    messages.c.kind,
    messages.c.author_name,
    messages.c.created_at,
    messages.c.active,
    messages.c.compacted,
    messages.c.compaction_id,
    func.substr(messages.c.text, 1, INDEX_CHARS).label("quoted"),  # what a snippet may quote
)
_HITS = select(*_HIT_COLUMNS).where(messages.c.id.in_(bindparam("ids", expanding=True)))
"""The rows of a page's hits: built once (its cache key too), run with each page's ids."""


def _read_hits(conn: Connection, page: Sequence[Found], parsed: ParsedQuery) -> list[SearchHit]:
    rows: dict[int, RowMapping] = {}
    for part in chunks([f.id for f in page]):
        result = conn.execute(_HITS, {"ids": part})
        rows.update((int(row["id"]), row) for row in result.mappings())
    return [
        SearchHit(
            message_id=f.id,
            session_id=r["session_id"],
            seq=int(r["seq"]),
            role=r["role"],
            kind=r["kind"],
            author_name=r["author_name"],
            created_at=r["created_at"],
            active=bool(r["active"]),
            compacted=bool(r["compacted"]),
            compaction_id=r["compaction_id"],
            snippet=make_snippet(r["quoted"] or "", parsed, substring=f.substring),
            rank=f.rank,
            substring=f.substring,
        )
        for f in page
        if (r := rows.get(f.id)) is not None
    ]


def _postgres_setup(conn: Connection) -> int:
    """Set this transaction up for search; the highest message id (one round trip)."""
    # The subquery is planned before set_config runs, so max(id) still reads the primary key.
    # plan_cache_mode: psycopg prepares a statement on its 5th run, and PostgreSQL may then
    # plan it for unknown parameters (a full-text LIMIT query went from 1 ms to 60 ms).
    # enable_indexscan: matches are read in id ranges (search_tiers); walking the primary key
    # backwards instead, testing every row, is what PostgreSQL picks when it expects many
    # matches, and it reads the whole table for a word it misjudged as common.
    setup = text(
        "SELECT set_config('plan_cache_mode', 'force_custom_plan', true),"
        " set_config('enable_indexscan', 'off', true),"
        " (SELECT coalesce(max(id), 0) FROM messages)"
    )
    row = conn.execute(setup).one()
    return int(row[2])


class SearchOps(Repo):
    rank_window = RANK_WINDOW
    """How many of the newest words-tier matches relevance ranks (see :data:`RANK_WINDOW`)."""

    async def search(
        self,
        query: str,
        filters: SearchFilters,
        *,
        limit: int = 20,
        offset: int = 0,
        sort: SearchSort = "relevance",
    ) -> list[SearchHit]:
        """Hits in ``sort`` order; ``[]`` for a query with nothing to look for. Never raises on input."""
        parsed = parse(query)
        offset = max(offset, 0)
        if not parsed.usable or limit <= 0:
            return []
        postgres = self._db.dialect == "postgresql"
        sql: SearchSql = PostgresSearch() if postgres else SqliteSearch()
        need, window = offset + limit, self.rank_window

        def work(conn: Connection) -> list[SearchHit]:
            top = _postgres_setup(conn) if postgres else 0
            found = find(conn, sql, parsed, filters, need=need, sort=sort, window=window, top=top)
            return _read_hits(conn, found[offset:], parsed)

        # Every statement of a search in one read transaction, and on SQLite in one thread hop.
        return await self._db.read_at_once(work)

    async def count_hits(self, query: str, filters: SearchFilters, *, cap: int) -> int:
        """How many hits :meth:`search` has for ``query`` in all, counted up to ``cap + 1``: a result
        above ``cap`` means "more than ``cap``" (a common word matches a large share of the table)."""
        parsed = parse(query)
        if not parsed.usable or cap <= 0:
            return 0
        postgres = self._db.dialect == "postgresql"
        sql: SearchSql = PostgresSearch() if postgres else SqliteSearch()

        def work(conn: Connection) -> int:
            top = _postgres_setup(conn) if postgres else 0
            # Newest first reads ids only (no ranking, no snippets); both orders hold the same hits.
            found = find(conn, sql, parsed, filters, need=cap + 1, sort="recent", window=0, top=top)
            return len(found)

        return await self._db.read_at_once(work)

    async def search_index_problem(self) -> str | None:
        """What is missing from the search indexes, in one line; ``None`` when nothing is.

        Only PostgreSQL can lack one: the substring index needs ``pg_trgm``, which the migration
        skips when the extension cannot be created (search still works, scanning the table).
        """
        if self._db.dialect != "postgresql":
            return None
        async with self._tx(write=False) as s:
            found = await s.scalar(text("SELECT to_regclass('ix_messages_text_trgm') IS NOT NULL"))
        if found:
            return None
        return (
            "no substring index (pg_trgm could not be created): substring search scans every message; as the"
            " database owner run CREATE EXTENSION pg_trgm; CREATE INDEX ix_messages_text_trgm ON messages"
            f" USING gin (left(text, {INDEX_CHARS}) gin_trgm_ops)"
        )

    async def rebuild_search_index(self) -> None:
        """Rebuild SQLite's FTS tables from ``messages`` (PostgreSQL's indexes are always current)."""
        if self._db.dialect == "sqlite":
            async with self._tx() as s:
                for table in ("messages_fts", "messages_fts_trgm"):
                    await s.execute(text(f"INSERT INTO {table}({table}) VALUES ('rebuild')"))
