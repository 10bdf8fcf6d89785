"""Full-text search over every message, active and archived, in any script.

A query (:mod:`gateway.store.search_query`) is answered in two tiers: **words** (and CJK
words found character by character), then **substrings** of three characters or more
for what the words tier missed. The order is

- ``relevance`` (default): words-tier hits by the engine's rank (bm25 on SQLite,
  ``ts_rank`` on PostgreSQL) — among the newest :data:`~gateway.store.search_sql.RANK_WINDOW`
  matches when there are more, older ones following newest first — then substring-only
  hits, newest first;
- ``recent``: every hit of both tiers, newest first (stops early on both engines).

Both orders return the same set of hits. Phase one finds the ids of the page
(:mod:`gateway.store.search_sql`); phase two reads those rows and cuts their snippets
(:mod:`gateway.store.search_snippet`), identically on both engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import RowMapping, Select, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from agent.types import SearchFilters, SearchHit, SearchSort
from gateway.store.base import Repo, chunks
from gateway.store.models import messages
from gateway.store.search_index import INDEX_CHARS
from gateway.store.search_query import ParsedQuery, parse
from gateway.store.search_snippet import make_snippet
from gateway.store.search_sql import RANK_WINDOW, PostgresSearch, SearchSql, SqliteSearch

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


@dataclass(frozen=True, slots=True)
class _Found:
    id: int
    rank: float
    substring: bool  # found by the substring tier only


async def _ids(s: AsyncSession, stmt: Select[Any] | None, *, substring: bool = False) -> list[_Found]:
    if stmt is None:
        return []
    return [_Found(int(r[0]), float(r[1] or 0.0), substring) for r in await s.execute(stmt)]


async def _by_relevance(
    s: AsyncSession, sql: SearchSql, parsed: ParsedQuery, filters: SearchFilters, need: int
) -> list[_Found]:
    cut = sql.words_cutoff(parsed)
    cutoff = None if cut is None else await s.scalar(cut)
    found = await _ids(s, sql.words(parsed, filters, ranked=True, limit=need, from_id=cutoff))
    if cutoff is not None and len(found) < need:
        older = sql.words(parsed, filters, ranked=False, limit=need - len(found), below_id=cutoff)
        found += await _ids(s, older)
    if len(found) < need:
        found += await _ids(s, sql.substrings(parsed, filters, limit=need - len(found)), substring=True)
    return found


async def _by_recency(
    s: AsyncSession, sql: SearchSql, parsed: ParsedQuery, filters: SearchFilters, need: int
) -> list[_Found]:
    words = await _ids(s, sql.words(parsed, filters, ranked=False, limit=need))
    seen = {f.id for f in words}
    more = sql.substrings(parsed, filters, limit=need, exclude_words=False)
    substrings = [f for f in await _ids(s, more, substring=True) if f.id not in seen]
    return sorted(words + substrings, key=lambda f: f.id, reverse=True)[:need]


async def _read_hits(s: AsyncSession, page: Sequence[_Found], parsed: ParsedQuery) -> list[SearchHit]:
    rows: dict[int, RowMapping] = {}
    for part in chunks([f.id for f in page]):
        result = await s.execute(select(*_HIT_COLUMNS).where(messages.c.id.in_(part)))
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
        )
        for f in page
        if (r := rows.get(f.id)) is not None
    ]


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
        engine = SqliteSearch if self._db.dialect == "sqlite" else PostgresSearch
        sql: SearchSql = engine(rank_window=self.rank_window)
        order = _by_recency if sort == "recent" else _by_relevance
        async with self._tx(write=False) as s:
            if self._db.dialect == "postgresql":
                # psycopg prepares a statement on its 5th run, and PostgreSQL may then plan it
                # for unknown parameters: a full-text LIMIT query went from 1 ms to 60 ms.
                await s.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
            found = await order(s, sql, parsed, filters, offset + limit)
            return await _read_hits(s, found[offset:], parsed)

    async def rebuild_search_index(self) -> None:
        """Rebuild SQLite's FTS tables from ``messages`` (PostgreSQL's indexes are always current)."""
        if self._db.dialect == "sqlite":
            async with self._tx() as s:
                for table in ("messages_fts", "messages_fts_trgm"):
                    await s.execute(text(f"INSERT INTO {table}({table}) VALUES ('rebuild')"))
