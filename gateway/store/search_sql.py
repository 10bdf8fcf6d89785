"""The statements behind search, one builder per engine.

Each statement selects ids (and a rank) only; :mod:`gateway.store.search_ops` orders the
tiers, pages, and reads the few hits it shows afterwards. Every query value is a bound
parameter produced by :mod:`gateway.store.search_query` (quoted letters and digits).

SQLite: ``messages_fts`` (FTS5 ``unicode61``; columns ``text`` and ``cjk``) and
``messages_fts_trgm`` (FTS5 ``trigram``), both over the view ``messages_fts_source``.
PostgreSQL: the generated ``text_tsv`` column, ``to_tsvector('simple', search_cjk)``
and ``left(text, INDEX_CHARS)`` with ``pg_trgm``, each with its GIN index.
"""

from __future__ import annotations

from typing import Any, Protocol

from sqlalchemy import (
    ColumnElement,
    Integer,
    Select,
    bindparam,
    column,
    false,
    func,
    literal_column,
    not_,
    or_,
    select,
    table,
    text,
)
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.sql.elements import TextClause

from agent.types import SearchFilters
from gateway.store.models import messages, sessions
from gateway.store.search_index import INDEX_CHARS
from gateway.store.search_query import (
    ParsedQuery,
    Term,
    fts5_all,
    fts5_any,
    fts5_substrings,
    like_pattern,
    to_fts5,
    to_tsqueries,
    ts_all,
    ts_any,
)

RANK_WINDOW = 10_000
"""Relevance ranks the newest this-many matches of the words tier; older matches follow, newest
first. Ranking costs a little per match, so a common word would otherwise rank them all."""


def visible(filters: SearchFilters) -> list[ColumnElement[bool]]:
    """The rows a search may show, given its filters."""
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


def _with_sessions(stmt: Select[Any], filters: SearchFilters) -> Select[Any]:
    if filters.platform is None and filters.chat_id is None:
        return stmt
    return stmt.join(sessions, sessions.c.id == messages.c.session_id)


class SearchSql(Protocol):
    """Statements for one engine; each returns ``None`` when its tier cannot match anything."""

    def words_cutoff(self, parsed: ParsedQuery) -> Select[Any] | None:
        """The id of the ``rank_window``-th newest words-tier match (no row: fewer matches)."""

    def words(
        self,
        parsed: ParsedQuery,
        filters: SearchFilters,
        *,
        ranked: bool,
        limit: int,
        from_id: int | None = None,
        below_id: int | None = None,
    ) -> Select[Any] | None:
        """``(id, rank)`` of words-tier hits, best first (``ranked``) or newest first."""

    def substrings(
        self, parsed: ParsedQuery, filters: SearchFilters, *, limit: int, exclude_words: bool = True
    ) -> Select[Any] | None:
        """``(id, rank)`` of substring-tier hits, newest first; without ``exclude_words`` the
        words tier's hits are not left out (cheaper when the caller merges both tiers itself)."""


# ---- SQLite --------------------------------------------------------------------------------

_FTS = table("messages_fts", column("rowid", Integer))
_FTS_REF: ColumnElement[Any] = literal_column("messages_fts")
_TRGM = table("messages_fts_trgm", column("rowid", Integer))


def _match(name: str, param: str, value: str) -> TextClause:
    return text(f"{name} MATCH :{param}").bindparams(bindparam(param, value))


def _fts_rowids(param: str, value: str) -> Select[Any]:
    return select(_FTS.c.rowid).where(_match("messages_fts", param, value))


class SqliteSearch:
    """FTS5: ``ORDER BY rank`` (bm25) lets FTS5 sort, so the join touches only the top rows."""

    def __init__(self, *, rank_window: int = RANK_WINDOW) -> None:
        self.rank_window = max(rank_window, 1)

    def words_cutoff(self, parsed: ParsedQuery) -> Select[Any] | None:
        match = to_fts5(parsed)
        if match is None:
            return None
        return (
            select(_FTS.c.rowid)
            .where(_match("messages_fts", "cut", match))
            .order_by(_FTS.c.rowid.desc())
            .offset(self.rank_window - 1)
            .limit(1)
        )

    def words(
        self,
        parsed: ParsedQuery,
        filters: SearchFilters,
        *,
        ranked: bool,
        limit: int,
        from_id: int | None = None,
        below_id: int | None = None,
    ) -> Select[Any] | None:
        match = to_fts5(parsed)
        if match is None:
            return None
        stmt: Select[Any] = select(messages.c.id, (-func.bm25(_FTS_REF)).label("rank")).select_from(
            _FTS.join(messages, messages.c.id == _FTS.c.rowid)
        )
        stmt = _with_sessions(stmt, filters).where(_match("messages_fts", "words", match), *visible(filters))
        if from_id is not None:
            stmt = stmt.where(_FTS.c.rowid >= from_id)
        if below_id is not None:
            stmt = stmt.where(_FTS.c.rowid < below_id)
        order = literal_column("messages_fts.rank") if ranked else _FTS.c.rowid.desc()
        return stmt.order_by(order).limit(limit)

    def substrings(
        self, parsed: ParsedQuery, filters: SearchFilters, *, limit: int, exclude_words: bool = True
    ) -> Select[Any] | None:
        match = fts5_substrings(parsed)
        if match is None:
            return None
        stmt: Select[Any] = select(messages.c.id, literal_column("0.0").label("rank")).select_from(
            _TRGM.join(messages, messages.c.id == _TRGM.c.rowid)
        )
        stmt = _with_sessions(stmt, filters).where(
            _match("messages_fts_trgm", "substrings", match), *visible(filters)
        )
        required = fts5_all(tuple(t for t in parsed.positive if not t.substring))
        if required is not None:
            stmt = stmt.where(messages.c.id.in_(_fts_rowids("required", required)))
        excluded = _substring_exclusions(parsed, exclude_words=exclude_words)
        if excluded is not None:
            stmt = stmt.where(messages.c.id.not_in(_fts_rowids("found", excluded)))
        return stmt.order_by(_TRGM.c.rowid.desc()).limit(limit)


def _substring_exclusions(parsed: ParsedQuery, *, exclude_words: bool) -> str | None:
    """Rows tier 2 leaves out: a short or CJK exclusion (which the trigram table cannot
    express) matches, or (``exclude_words``) tier 1 found them: its substring terms all
    match as words."""
    parts = [fts5_any(tuple(t for t in parsed.negative if not t.substring))]
    if exclude_words:
        parts.append(fts5_all(tuple(t for t in parsed.positive if t.substring)))
    return " OR ".join(f"({p})" for p in parts if p) or None


# ---- PostgreSQL ----------------------------------------------------------------------------

_SIMPLE: ColumnElement[Any] = literal_column("'simple'::regconfig")
_TSV: ColumnElement[Any] = literal_column("messages.text_tsv", TSVECTOR)
_CJK_TSV: ColumnElement[Any] = func.to_tsvector(_SIMPLE, messages.c.search_cjk)
_PREFIX: ColumnElement[Any] = func.left(messages.c.text, literal_column(str(INDEX_CHARS)))


def _tsquery(param: str, value: str) -> ColumnElement[Any]:
    return func.to_tsquery(_SIMPLE, bindparam(param, value))


def _matches(vector: ColumnElement[Any], param: str, value: str) -> ColumnElement[bool]:
    return vector.bool_op("@@")(_tsquery(param, value))


def _none_of(vector: ColumnElement[Any], param: str, value: str | None) -> list[ColumnElement[bool]]:
    if value is None:
        return []
    return [not_(func.coalesce(_matches(vector, param, value), false()))]


def _tier1(parsed: ParsedQuery, tag: str) -> tuple[list[ColumnElement[bool]], ColumnElement[Any]] | None:
    """Conditions of the words tier, and its rank (``tag`` keeps parameter names apart)."""
    queries = to_tsqueries(parsed)
    if queries is None:
        return None
    conditions: list[ColumnElement[bool]] = []
    rank: ColumnElement[Any] = literal_column("0.0")
    if queries.words is not None:
        conditions.append(_matches(_TSV, f"{tag}w", queries.words))
        rank = func.ts_rank(_TSV, _tsquery(f"{tag}rw", queries.words))
    if queries.cjk is not None:
        conditions += [messages.c.search_cjk.is_not(None), _matches(_CJK_TSV, f"{tag}c", queries.cjk)]
        rank = rank + func.ts_rank(_CJK_TSV, _tsquery(f"{tag}rc", queries.cjk))
    conditions += _none_of(_TSV, f"{tag}nw", queries.not_words)
    conditions += _none_of(_CJK_TSV, f"{tag}nc", queries.not_cjk)
    return conditions, rank


def _required(terms: tuple[Term, ...]) -> list[ColumnElement[bool]]:
    """Each of ``terms`` (short or CJK) as in tier 1."""
    out: list[ColumnElement[bool]] = []
    for i, term in enumerate(terms):
        query = ts_any((term,), cjk=term.cjk)
        if query is None:
            continue
        if term.cjk:
            out += [messages.c.search_cjk.is_not(None), _matches(_CJK_TSV, f"req{i}", query)]
        else:
            out.append(_matches(_TSV, f"req{i}", query))
    return out


class PostgresSearch:
    """tsvector + pg_trgm; runs with custom plans (see :func:`gateway.store.db.custom_plans`)."""

    def __init__(self, *, rank_window: int = RANK_WINDOW) -> None:
        self.rank_window = max(rank_window, 1)

    def words_cutoff(self, parsed: ParsedQuery) -> Select[Any] | None:
        tier = _tier1(parsed, "k")
        if tier is None:
            return None
        return (
            select(messages.c.id)
            .where(*tier[0])
            .order_by(messages.c.id.desc())
            .offset(self.rank_window - 1)
            .limit(1)
        )

    def words(
        self,
        parsed: ParsedQuery,
        filters: SearchFilters,
        *,
        ranked: bool,
        limit: int,
        from_id: int | None = None,
        below_id: int | None = None,
    ) -> Select[Any] | None:
        tier = _tier1(parsed, "t")
        if tier is None:
            return None
        conditions, rank = tier
        stmt = _with_sessions(select(messages.c.id, rank.label("rank")), filters)
        stmt = stmt.where(*conditions, *visible(filters))
        if from_id is not None:
            stmt = stmt.where(messages.c.id >= from_id)
        if below_id is not None:
            stmt = stmt.where(messages.c.id < below_id)
        order = (rank.desc(), messages.c.id.desc()) if ranked else (messages.c.id.desc(),)
        return stmt.order_by(*order).limit(limit)

    def substrings(
        self, parsed: ParsedQuery, filters: SearchFilters, *, limit: int, exclude_words: bool = True
    ) -> Select[Any] | None:
        if not parsed.has_substrings:
            return None
        conditions: list[ColumnElement[bool]] = []
        for i, term in enumerate(parsed.terms):
            if term.substring:
                like = _PREFIX.ilike(bindparam(f"like{i}", like_pattern(term)))
                conditions.append(not_(like) if term.negated else like)
        conditions += _required(tuple(t for t in parsed.positive if not t.substring))
        if exclude_words:  # tier 1 found the rows where every substring term is also a word
            found = ts_all(tuple(t for t in parsed.positive if t.substring), cjk=False)
            conditions += _none_of(_TSV, "found", found)
        short = tuple(t for t in parsed.negative if not t.substring)
        conditions += _none_of(_TSV, "nsw", ts_any(short, cjk=False))
        conditions += _none_of(_CJK_TSV, "nsc", ts_any(short, cjk=True))
        stmt = _with_sessions(select(messages.c.id, literal_column("0.0").label("rank")), filters)
        return stmt.where(*conditions, *visible(filters)).order_by(messages.c.id.desc()).limit(limit)
