"""Relevance: a BM25 score computed on the text of the newest words-tier matches, in Python.

Why not the engines' own rank: FTS5's ``bm25()`` first counts, for each phrase of the
query, every row of the table that holds it (its IDF), so a common word or a phrase of
common words costs tens of milliseconds at a million rows however few rows are ranked;
``ts_rank`` reads each matching row's tsvector. Ranking the newest :data:`RANK_WINDOW`
matches here costs the same for any query, and orders hits identically on both engines.

Every hit of the words tier holds every positive term (the query is an AND), so terms
are weighted alike: the score of a message is the sum, over the positive terms, of
BM25's saturated term frequency ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg_len))``,
where ``tf`` counts the occurrences of the term's text (case and accents ignored; at least
one, since the index matched it) and ``len`` is the message's length in characters,
``avg_len`` the mean over the ranked messages. Ties go to the newest. Counting with
``str.count`` rather than a word-boundary regex keeps 500 candidates under a few
milliseconds; a term found inside a longer word counts too, which barely moves a
saturated score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.store.search_query import ParsedQuery
from gateway.store.search_snippet import folded

RANK_WINDOW = 500
"""How many of the newest words-tier matches relevance orders; older matches follow, newest first."""
SCORE_CHARS = 2_048
"""Characters of a message read to score it (a longer one's counts are extrapolated)."""
K1 = 1.2
B = 0.75


@dataclass(frozen=True, slots=True)
class Candidate:
    """A words-tier match: its id, the first :data:`SCORE_CHARS` of its text, its full length."""

    id: int
    text: str
    chars: int


def rank(candidates: Sequence[Candidate], parsed: ParsedQuery) -> list[tuple[int, float]]:
    """``(id, score)`` of ``candidates``, best first (ties: newest first)."""
    if not candidates:
        return []
    literals = [folded(t.literal) for t in parsed.positive]
    avg = sum(max(c.chars, 1) for c in candidates) / len(candidates)
    scored: list[tuple[int, float]] = []
    for c in candidates:
        text = folded(c.text)
        scale = c.chars / len(c.text) if c.chars > len(c.text) > 0 else 1.0
        norm = K1 * (1 - B + B * max(c.chars, 1) / avg)
        score = 0.0
        for literal in literals:
            tf = max(1.0, text.count(literal) * scale)
            score += tf * (K1 + 1) / (tf + norm)
        scored.append((c.id, score))
    return sorted(scored, key=lambda s: (-s[1], -s[0]))
