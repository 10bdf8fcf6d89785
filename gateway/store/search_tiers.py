"""Which hits make a page: the words tier (ranked or newest first), then the substring tier.

``relevance``: the newest :data:`~gateway.store.search_rank.RANK_WINDOW` words-tier matches,
ranked (:mod:`gateway.store.search_rank`); when there are more, the older ones follow, newest
first. ``recent``: words-tier hits newest first. In both orders, substring-only hits come
after every words-tier hit, newest first: a whole-word match always outranks a fragment.

Finding the newest n matches is cheap on SQLite (FTS5 walks its doclists backwards and
stops). PostgreSQL's GIN indexes return matches in no order, and the other way, walking
the primary key backwards and testing each row, reads n / (share of rows that match) rows:
100,000 to find 1,000 matches of a word in 1% of the messages, and all of them when the
word is rarer than PostgreSQL guessed. So on PostgreSQL the ids are searched in ranges
going back from the newest, each sized from the share of matches seen so far: the first
(:data:`FIRST_SPAN` x n ids) is tested row by row, and so are the next while matches are
dense, which never reads a common word's long GIN posting list; once matches are sparse,
each range is a bitmap of the GIN index ANDed with one of the primary key, so the rows
read are about the matches found.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from agent.types import SearchFilters, SearchSort
from gateway.store.search_query import ParsedQuery
from gateway.store.search_rank import Candidate, rank
from gateway.store.search_sql import IdRange, Query, SearchSql

FIRST_SPAN = 4
"""The first id range PostgreSQL looks in holds this many ids per hit wanted (at least
:data:`MIN_FIRST_SPAN`); it is tested row by row, without the search indexes (a GIN bitmap
of a common word lists a quarter of the table). While at least :data:`DENSE` of the rows
match, the next range is tested so too; then ranges are read through the indexes. Each next
range is as long as the share of matches seen says the hits still wanted need, with a
margin (:data:`MARGIN`), and at most :data:`MAX_GROWTH` times the last one; after a range
with no match at all, the rest is read in one go (each index read costs the whole GIN
posting list, whatever the range)."""
MIN_FIRST_SPAN = 2_048
DENSE = 0.02
MARGIN = 1.25
MAX_GROWTH = 64


@dataclass(frozen=True, slots=True)
class Found:
    id: int
    rank: float
    substring: bool  # found by the substring tier only


Statement = Callable[[IdRange, int], Query | None]
"""A statement for the ids in a range, newest first, with a limit."""


def newest(
    conn: Connection,
    sql: SearchSql,
    statement: Statement,
    need: int,
    *,
    below: int | None,
    top: int,
    first_span: int | None = None,
) -> Sequence[Sequence[Any]]:
    """Up to ``need`` rows of ``statement``, newest first, with ids below ``below`` (``top``: the
    highest id there is; ``first_span``: how many ids the first range holds, by default
    :data:`FIRST_SPAN` per row wanted)."""
    if need <= 0:
        return []
    if not sql.scan_by_ranges:
        query = statement(IdRange(below=below), need)
        return [] if query is None else query.rows(conn)
    high = top + 1 if below is None else below
    span = first_span or max(FIRST_SPAN * need, MIN_FIRST_SPAN)
    found: list[Sequence[Any]] = []
    scan = True  # row by row while the matches are dense: no GIN posting list is read
    while len(found) < need and high > 1:
        low = max(high - span, 0)
        rows = (
            []
            if (query := statement(IdRange(above=low or None, below=high, scan=scan), need - len(found)))
            is None
            else query.rows(conn)
        )
        found += rows
        density = len(rows) / max(high - 1 - low, 1)
        high = low + 1
        scan = scan and density >= DENSE
        if not density:  # rare terms: their GIN bitmap is short, read it over every id left
            span = high
        else:
            wanted = math.ceil((need - len(found)) / density * MARGIN)
            span = wanted if scan else min(max(wanted, span), span * MAX_GROWTH)
    return found


def find(
    conn: Connection,
    sql: SearchSql,
    parsed: ParsedQuery,
    filters: SearchFilters,
    *,
    need: int,
    sort: SearchSort,
    window: int,
    top: int,
) -> list[Found]:
    """The first ``need`` hits, in order (``top``: the highest id, for the ranges)."""

    def words(ids: IdRange, limit: int) -> Query | None:
        return sql.words(parsed, filters, ids, limit=limit)

    def scored(ids: IdRange, limit: int) -> Query | None:
        # The ranked rows carry what they are scored on: no second read of the same rows.
        return sql.words(parsed, filters, ids, limit=limit, scored=True)

    found: list[Found] = []
    if sort == "recent":
        found = [Found(int(r[0]), 0.0, False) for r in newest(conn, sql, words, need, below=None, top=top)]
    else:
        rows = newest(conn, sql, scored, window, below=None, top=top)
        candidates = list(itertools.starmap(Candidate, rows))  # (id, text, length): SCORED
        found = [Found(cid, score, False) for cid, score in rank(candidates, parsed)[:need]]
        if len(candidates) == window:  # more matches than were ranked: the older ones follow
            oldest = min(c.id for c in candidates)
            older = newest(conn, sql, words, need - len(found), below=oldest, top=top)
            found += [Found(int(r[0]), 0.0, False) for r in older]
    if len(found) < need:

        def substrings(ids: IdRange, limit: int) -> Query | None:
            return sql.substrings(parsed, filters, ids, limit=limit)

        more = newest(conn, sql, substrings, need - len(found), below=None, top=top)
        found += [Found(int(r[0]), 0.0, True) for r in more]
    return found
