"""Full-text search over every message, active and archived.

SQLite: the FTS5 table ``messages_fts`` (bm25 rank). PostgreSQL: the generated
``messages.text_tsv`` column (``ts_rank``). Snippets are cut and marked in Python
(:mod:`gateway.store.search_snippet`), identically on both engines. The user's query
is parsed by :mod:`gateway.store.search_query`; only quoted letters and digits reach
the database, always as a bound parameter.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Select, column, func, literal_column, or_, select, table, text
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.types import Integer

from agent.types import SearchFilters, SearchHit
from gateway.store.base import Repo
from gateway.store.models import messages, sessions
from gateway.store.search_index import INDEX_CHARS
from gateway.store.search_query import parse, to_fts5, to_tsquery
from gateway.store.search_snippet import make_snippet

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
)
_QUOTED = func.substr(messages.c.text, 1, INDEX_CHARS).label("quoted")
"""What a snippet may quote: the indexed prefix."""


def _filters(filters: SearchFilters) -> list[ColumnElement[bool]]:
    # Rows retired by a restore (neither active nor archived) are never shown. A pruned copy
    # (a compaction's non-summary product) repeats part of the original it replaced, which that
    # compaction archived: only the active view shows the copy, every other view the original.
    conditions: list[ColumnElement[bool]] = [or_(messages.c.active, messages.c.compacted)]
    if filters.state != "active":
        conditions.append(or_(messages.c.produced_by.is_(None), messages.c.kind == "summary"))
    if filters.platform is not None:
        conditions.append(sessions.c.platform == filters.platform)
    if filters.chat_id is not None:
        conditions.append(sessions.c.chat_id == filters.chat_id)
    if filters.session_id is not None:
        conditions.append(messages.c.session_id == filters.session_id)
    if filters.user_id is not None:
        conditions.append(messages.c.author_id == filters.user_id)
    if filters.since is not None:
        conditions.append(messages.c.created_at >= filters.since)
    if filters.until is not None:
        conditions.append(messages.c.created_at < filters.until)
    if filters.state == "active":
        conditions.append(messages.c.active.is_(True))
    elif filters.state == "archived":
        conditions.append(messages.c.active.is_(False))
    return conditions


def _sqlite_statement(match: str, filters: SearchFilters) -> Select[Any]:
    fts = table("messages_fts", column("rowid", Integer))
    fts_ref: ColumnElement[Any] = literal_column("messages_fts")
    score = func.bm25(fts_ref)
    return (
        select(*_HIT_COLUMNS, _QUOTED, (-score).label("rank"))
        .select_from(
            fts.join(messages, messages.c.id == fts.c.rowid).join(
                sessions, sessions.c.id == messages.c.session_id
            )
        )
        .where(text("messages_fts MATCH :match").bindparams(match=match), *_filters(filters))
        .order_by(score, messages.c.id)
    )


def _postgres_statement(tsquery: str, filters: SearchFilters) -> Select[Any]:
    config: ColumnElement[Any] = literal_column("'simple'::regconfig")
    query = func.to_tsquery(config, tsquery)
    tsv = literal_column("messages.text_tsv", TSVECTOR)
    rank = func.ts_rank(tsv, query)
    return (
        select(*_HIT_COLUMNS, _QUOTED, rank.label("rank"))
        .select_from(messages.join(sessions, sessions.c.id == messages.c.session_id))
        .where(tsv.bool_op("@@")(query), *_filters(filters))
        .order_by(rank.desc(), messages.c.id)
    )


class SearchOps(Repo):
    async def search(
        self, query: str, filters: SearchFilters, *, limit: int = 20, offset: int = 0
    ) -> list[SearchHit]:
        """Ranked hits, best first; ``[]`` for a query with nothing to look for. Never raises on input."""
        parsed = parse(query)
        if self._db.dialect == "sqlite":
            match = to_fts5(parsed)
            stmt = None if match is None else _sqlite_statement(match, filters)
        else:
            tsquery = to_tsquery(parsed)
            stmt = None if tsquery is None else _postgres_statement(tsquery, filters)
        if stmt is None or limit <= 0:
            return []
        stmt = stmt.limit(limit).offset(max(offset, 0))
        async with self._tx(write=False) as s:
            rows = (await s.execute(stmt)).mappings().all()
        return [
            SearchHit(
                message_id=int(r["id"]),
                session_id=r["session_id"],
                seq=int(r["seq"]),
                role=r["role"],
                kind=r["kind"],
                author_name=r["author_name"],
                created_at=r["created_at"],
                active=bool(r["active"]),
                compacted=bool(r["compacted"]),
                compaction_id=r["compaction_id"],
                snippet=make_snippet(r["quoted"] or "", parsed),
                rank=float(r["rank"] or 0.0),
            )
            for r in rows
        ]

    async def rebuild_search_index(self) -> None:
        """Rebuild the SQLite FTS index from ``messages`` (PostgreSQL's column is always current)."""
        if self._db.dialect == "sqlite":
            async with self._tx() as s:
                await s.execute(text("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')"))
