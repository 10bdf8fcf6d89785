"""The statements behind search, one builder per engine.

Each statement finds ids newest first, with a LIMIT, so it stops early;
:mod:`gateway.store.search_ops` ranks, orders the tiers, pages, and reads the few hits
it shows afterwards. Every query value is a bound
parameter produced by :mod:`gateway.store.search_query` (quoted letters and digits), handed
over beside its statement (:class:`Query`). SQLite's statements hold no value at all, so one
is built once per shape (which filters, which id bounds, which checks) and reused: building a
statement and its cache key cost more than running it for a rare word.

SQLite: ``messages_fts`` (FTS5 ``unicode61``; columns ``text`` and ``cjk``) and
``messages_fts_trgm`` (FTS5 ``trigram``), both over the view ``messages_fts_source``.
PostgreSQL: the generated ``text_tsv`` column, ``to_tsvector('simple', search_cjk)``
and ``left(text, INDEX_CHARS)`` with ``pg_trgm``, each with its GIN index.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    Row,
    Select,
    Text,
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
    substring_checks,
    to_fts5,
    to_tsqueries,
    ts_all,
    ts_any,
)
from gateway.store.search_rank import SCORE_CHARS


@dataclass(frozen=True, slots=True)
class Query:
    """A statement and the values of its parameters."""

    statement: Select[Any]
    params: dict[str, Any]

    def rows(self, conn: Connection) -> Sequence[Row[Any]]:
        return conn.execute(self.statement, self.params).all()


@dataclass(frozen=True, slots=True)
class Shape:
    """Which of a search's filters are set (and its state): all a statement's text depends on."""

    platform: bool
    chat_id: bool
    session_id: bool
    user_id: bool
    since: bool
    until: bool
    before_id: bool
    state: str
    with_delegations: bool = False

    @classmethod
    def of(cls, filters: SearchFilters) -> Shape:
        return cls(
            platform=filters.platform is not None,
            chat_id=filters.chat_id is not None,
            session_id=filters.session_id is not None,
            user_id=filters.user_id is not None,
            since=filters.since is not None,
            until=filters.until is not None,
            before_id=filters.before_id is not None,
            state=filters.state,
            with_delegations=filters.with_delegations,
        )


def _filter_params(filters: SearchFilters) -> dict[str, Any]:
    """The values :func:`visible` leaves to bound parameters."""
    values = {
        "f_platform": filters.platform,
        "f_chat_id": filters.chat_id,
        "f_session_id": filters.session_id,
        "f_user_id": filters.user_id,
        "f_since": filters.since,
        "f_until": filters.until,
        "f_before_id": filters.before_id,
    }
    return {name: value for name, value in values.items() if value is not None}


_DELEGATED = sessions.alias("delegated")
"""Sub-agent sessions, apart from the ``sessions`` a filter by platform or chat joins."""


def visible(shape: Shape) -> list[ColumnElement[bool]]:
    """The rows a search may show, given which filters it has (values: :func:`_filter_params`)."""
    # Rows retired by a restore (neither active nor archived) are never shown. A pruned copy
    # (a compaction's non-summary product) repeats part of the original it replaced, which that
    # compaction archived: only the active view shows the copy, every other view the original.
    conditions: list[ColumnElement[bool]] = [or_(messages.c.active, messages.c.compacted)]
    if shape.state != "active":
        conditions.append(or_(messages.c.produced_by.is_(None), messages.c.kind == "summary"))
    if shape.platform:
        conditions.append(sessions.c.platform == bindparam("f_platform"))
    if shape.chat_id:
        conditions.append(sessions.c.chat_id == bindparam("f_chat_id"))
    if shape.session_id and shape.with_delegations:
        runs = _DELEGATED.c.id
        children = select(runs).where(_DELEGATED.c.parent_session_id == bindparam("f_session_id"))
        conditions.append(
            or_(messages.c.session_id == bindparam("f_session_id"), messages.c.session_id.in_(children))
        )
    elif shape.session_id:
        conditions.append(messages.c.session_id == bindparam("f_session_id"))
    if shape.user_id:
        conditions.append(messages.c.author_id == bindparam("f_user_id"))
    if shape.since:
        conditions.append(messages.c.created_at >= bindparam("f_since"))
    if shape.until:
        conditions.append(messages.c.created_at < bindparam("f_until"))
    if shape.before_id:
        conditions.append(messages.c.id < bindparam("f_before_id"))
    if shape.state == "active":
        conditions.append(messages.c.active.is_(True))
    elif shape.state == "archived":
        conditions.append(messages.c.active.is_(False))
    return conditions


def _with_sessions(stmt: Select[Any], shape: Shape) -> Select[Any]:
    if not shape.platform and not shape.chat_id:
        return stmt
    return stmt.join(sessions, sessions.c.id == messages.c.session_id)


def _newest_first(stmt: Select[Any], order_by: ColumnElement[Any]) -> Select[Any]:
    return stmt.order_by(order_by.desc()).limit(bindparam("limit", type_=Integer))


SCORED: tuple[ColumnElement[Any], ...] = (
    messages.c.id,
    func.substr(messages.c.text, 1, SCORE_CHARS),
    func.length(messages.c.text),
)
"""A words-tier hit as relevance reads it: its id, the start of its text, its length."""


def _columns(scored: bool) -> tuple[ColumnElement[Any], ...]:
    return SCORED if scored else (messages.c.id,)


@dataclass(frozen=True, slots=True)
class IdRange:
    """Ids above ``above`` (exclusive) and below ``below`` (exclusive); ``None``: unbounded.

    ``scan``: test every row of the range rather than ask the search indexes (PostgreSQL):
    cheaper for a small range when the terms are common, since a GIN bitmap of a common
    word holds every row that has it.
    """

    above: int | None = None
    below: int | None = None
    scan: bool = False

    @property
    def bounds(self) -> tuple[bool, bool]:
        """Which bounds are set: all the statement's text depends on."""
        return self.above is not None, self.below is not None

    def params(self) -> dict[str, int]:
        return {name: v for name, v in (("above", self.above), ("below", self.below)) if v is not None}


def _bound(stmt: Select[Any], bounds: tuple[bool, bool], id_column: ColumnElement[Any]) -> Select[Any]:
    above, below = bounds
    if above:
        stmt = stmt.where(id_column > bindparam("above", type_=Integer))
    if below:
        stmt = stmt.where(id_column < bindparam("below", type_=Integer))
    return stmt


def _params(filters: SearchFilters, ids: IdRange, limit: int, **values: Any) -> dict[str, Any]:
    return {**values, **_filter_params(filters), **ids.params(), "limit": limit}


EVERY_ID = IdRange()


class SearchSql(Protocol):
    """Statements for one engine, each newest first; ``None`` when its tier cannot match anything."""

    scan_by_ranges: bool
    """The engine cannot read matches newest first from its index (PostgreSQL's GIN): the caller
    should look in id ranges that widen from the newest (see ``gateway.store.search_ops``)."""

    def words(
        self, parsed: ParsedQuery, filters: SearchFilters, ids: IdRange, *, limit: int, scored: bool = False
    ) -> Query | None:
        """``(id,)`` of words-tier hits; ``scored``: ``(id, text, length)``, what relevance scores
        (:data:`SCORED`)."""

    def substrings(
        self, parsed: ParsedQuery, filters: SearchFilters, ids: IdRange, *, limit: int
    ) -> Query | None:
        """``(id,)`` of substring-tier hits that are not words-tier hits."""


# ---- SQLite --------------------------------------------------------------------------------

_FTS = table("messages_fts", column("rowid", Integer))
_TRGM = table("messages_fts_trgm", column("rowid", Integer))
_INDEXED: ColumnElement[Any] = func.substr(messages.c.text, 1, INDEX_CHARS)
"""The part of a message the trigram table indexed: where a substring candidate is checked."""


def _match(name: str, param: str) -> TextClause:
    return text(f"{name} MATCH :{param}")


def _fts_rowids(param: str) -> Select[Any]:
    return select(_FTS.c.rowid).where(_match("messages_fts", param))


class SqliteSearch:
    """FTS5 returns matches in rowid order, so ``ORDER BY rowid DESC LIMIT n`` stops after n."""

    scan_by_ranges = False

    def words(
        self, parsed: ParsedQuery, filters: SearchFilters, ids: IdRange, *, limit: int, scored: bool = False
    ) -> Query | None:
        match = to_fts5(parsed)
        if match is None:
            return None
        stmt = _sqlite_words(scored, Shape.of(filters), ids.bounds)
        return Query(stmt, _params(filters, ids, limit, words=match))

    def substrings(
        self, parsed: ParsedQuery, filters: SearchFilters, ids: IdRange, *, limit: int
    ) -> Query | None:
        match = fts5_substrings(parsed)
        if match is None:
            return None
        must, must_not = substring_checks(parsed)
        required = fts5_all(tuple(t for t in parsed.positive if not t.substring))
        stmt = _sqlite_substrings(
            tuple(c.operator for c in must),
            tuple(c.operator for c in must_not),
            required is not None,
            Shape.of(filters),
            ids.bounds,
        )
        values: dict[str, Any] = {
            "substrings": match,
            "found": _substring_exclusions(parsed),
            **{f"has{i}": c.pattern for i, c in enumerate(must)},
            **{f"lacks{i}": c.pattern for i, c in enumerate(must_not)},
        }
        if required is not None:
            values["required"] = required
        return Query(stmt, _params(filters, ids, limit, **values))


_SHAPES = 256
"""Statements kept per kind: far more than the filter combinations in use."""


@functools.lru_cache(maxsize=_SHAPES)
def _sqlite_words(scored: bool, shape: Shape, bounds: tuple[bool, bool]) -> Select[Any]:
    stmt = select(*_columns(scored)).select_from(_FTS.join(messages, messages.c.id == _FTS.c.rowid))
    stmt = _with_sessions(stmt, shape).where(_match("messages_fts", "words"), *visible(shape))
    return _newest_first(_bound(stmt, bounds, _FTS.c.rowid), _FTS.c.rowid)


@functools.lru_cache(maxsize=_SHAPES)
def _sqlite_substrings(
    must: tuple[str, ...], must_not: tuple[str, ...], required: bool, shape: Shape, bounds: tuple[bool, bool]
) -> Select[Any]:
    """``must``/``must_not``: the operator of each check (:class:`SubstringCheck`)."""
    stmt = select(messages.c.id).select_from(_TRGM.join(messages, messages.c.id == _TRGM.c.rowid))
    stmt = _with_sessions(stmt, shape).where(
        _match("messages_fts_trgm", "substrings"),
        *(_holds(op, f"has{i}") for i, op in enumerate(must)),
        *(not_(_holds(op, f"lacks{i}")) for i, op in enumerate(must_not)),
        *visible(shape),
    )
    if required:
        stmt = stmt.where(messages.c.id.in_(_fts_rowids("required")))
    stmt = stmt.where(messages.c.id.not_in(_fts_rowids("found")))
    return _newest_first(_bound(stmt, bounds, _TRGM.c.rowid), _TRGM.c.rowid)


def _holds(operator: str, param: str) -> ColumnElement[bool]:
    return _INDEXED.op(operator, is_comparison=True)(bindparam(param, type_=Text))


def _substring_exclusions(parsed: ParsedQuery) -> str:
    """Rows tier 2 leaves out: tier 1 found them (its substring terms all match as words), or
    a short or CJK exclusion (which the trigram table cannot express) matches."""
    parts = [
        fts5_all(tuple(t for t in parsed.positive if t.substring)),
        fts5_any(tuple(t for t in parsed.negative if not t.substring)),
    ]
    return " OR ".join(f"({p})" for p in parts if p)


# ---- PostgreSQL ----------------------------------------------------------------------------

_SIMPLE: ColumnElement[Any] = literal_column("'simple'::regconfig")
_TSV: ColumnElement[Any] = literal_column("messages.text_tsv", TSVECTOR)
_CJK_TSV: ColumnElement[Any] = literal_column("messages.cjk_tsv", TSVECTOR)
_PREFIX: ColumnElement[Any] = func.left(messages.c.text, literal_column(str(INDEX_CHARS)))


def _tsquery(param: str, value: str) -> ColumnElement[Any]:
    return func.to_tsquery(_SIMPLE, bindparam(param, value))


def _matches(vector: ColumnElement[Any], param: str, value: str) -> ColumnElement[bool]:
    return vector.bool_op("@@")(_tsquery(param, value))


def _none_of(vector: ColumnElement[Any], param: str, value: str | None) -> list[ColumnElement[bool]]:
    if value is None:
        return []
    return [not_(func.coalesce(_matches(vector, param, value), false()))]


def _unindexed(conditions: list[ColumnElement[bool]], ids: IdRange) -> list[ColumnElement[bool]]:
    """``conditions`` as they are, or (``ids.scan``) in a form no index can serve (tested row by row)."""
    if not ids.scan:
        return conditions
    return [func.coalesce(c, false()) for c in conditions]


def _tier1(parsed: ParsedQuery) -> list[ColumnElement[bool]] | None:
    """Conditions of the words tier."""
    queries = to_tsqueries(parsed)
    if queries is None:
        return None
    conditions: list[ColumnElement[bool]] = []
    if queries.words is not None:
        conditions.append(_matches(_TSV, "words", queries.words))
    if queries.cjk is not None:
        conditions += [_CJK_TSV.is_not(None), _matches(_CJK_TSV, "cjk", queries.cjk)]
    conditions += _none_of(_TSV, "not_words", queries.not_words)
    conditions += _none_of(_CJK_TSV, "not_cjk", queries.not_cjk)
    return conditions


def _required(terms: tuple[Term, ...]) -> list[ColumnElement[bool]]:
    """Each of ``terms`` (short or CJK) as in tier 1."""
    out: list[ColumnElement[bool]] = []
    for i, term in enumerate(terms):
        query = ts_any((term,), cjk=term.cjk)
        if query is None:
            continue
        if term.cjk:
            out += [_CJK_TSV.is_not(None), _matches(_CJK_TSV, f"req{i}", query)]
        else:
            out.append(_matches(_TSV, f"req{i}", query))
    return out


class PostgresSearch:
    """tsvector + pg_trgm; the search transaction plans with its values (``force_custom_plan``)."""

    scan_by_ranges = True

    def words(
        self, parsed: ParsedQuery, filters: SearchFilters, ids: IdRange, *, limit: int, scored: bool = False
    ) -> Query | None:
        conditions = _tier1(parsed)
        if conditions is None:
            return None
        shape = Shape.of(filters)
        stmt = _with_sessions(select(*_columns(scored)), shape)
        stmt = stmt.where(*_unindexed(conditions, ids), *visible(shape))
        return Query(
            _newest_first(_bound(stmt, ids.bounds, messages.c.id), messages.c.id),
            _params(filters, ids, limit),
        )

    def substrings(
        self, parsed: ParsedQuery, filters: SearchFilters, ids: IdRange, *, limit: int
    ) -> Query | None:
        if not parsed.has_substrings:
            return None
        conditions: list[ColumnElement[bool]] = []
        for i, term in enumerate(parsed.terms):
            if term.substring:
                like = _PREFIX.ilike(bindparam(f"like{i}", like_pattern(term)))
                conditions.append(not_(like) if term.negated else like)
        conditions += _required(tuple(t for t in parsed.positive if not t.substring))
        # Tier 1 found the rows where every substring term is also a word.
        conditions += _none_of(
            _TSV, "found", ts_all(tuple(t for t in parsed.positive if t.substring), cjk=False)
        )
        short = tuple(t for t in parsed.negative if not t.substring)
        conditions += _none_of(_TSV, "nsw", ts_any(short, cjk=False))
        conditions += _none_of(_CJK_TSV, "nsc", ts_any(short, cjk=True))
        shape = Shape.of(filters)
        stmt = _with_sessions(select(messages.c.id), shape).where(
            *_unindexed(conditions, ids), *visible(shape)
        )
        return Query(
            _newest_first(_bound(stmt, ids.bounds, messages.c.id), messages.c.id),
            _params(filters, ids, limit),
        )
