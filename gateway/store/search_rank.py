"""Relevance: a BM25 score computed on the text of the newest words-tier matches, in Python.

Why not the engines' own rank: FTS5's ``bm25()`` first counts, for each phrase of the
query, every row of the table that holds it (its IDF), so a common word or a phrase of
common words costs tens of milliseconds at a million rows however few rows are ranked;
``ts_rank`` reads each matching row's tsvector. Ranking the newest :data:`RANK_WINDOW`
matches here costs the same for any query, and orders hits identically on both engines.

Every hit of the words tier holds every positive term (the query is an AND), so terms
are weighted alike (no IDF): the score of a message is the sum, over the positive terms, of
BM25's saturated term frequency ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg_len))``,
where ``tf`` counts the term's occurrences as whole words (a phrase as consecutive words, a
prefix as words starting with it, a CJK term as its characters in a row; case and accents
ignored; at least one, since the index matched it), ``len`` is the message's length in words
and ``avg_len`` the mean over the ranked messages. Ties go to the
newest. A word is a run of letters and digits, as FTS5's ``unicode61`` cuts them (one
translation and string counts keep 500 candidates at ~2 ms); counting whole words rather than the
term's text anywhere (``ko`` inside ``saiko``) is what makes the order agree with a BM25
ranking (docs/search.md has the figures).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.store.search_query import ParsedQuery
from gateway.store.search_snippet import folded

RANK_WINDOW = 500
"""How many of the newest words-tier matches relevance orders; older matches follow, newest first."""
SCORE_CHARS = 1_024
"""Characters of a message read to score it (a longer one's counts are extrapolated)."""
K1 = 1.2
B = 0.75


@dataclass(frozen=True, slots=True)
class Candidate:
    """A words-tier match: its id, the first :data:`SCORE_CHARS` of its text, its full length."""

    id: int
    text: str
    chars: int


_ASCII_SEPARATORS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})
_SEPARATOR = re.compile(r"[\W_]+")


def _spaced(text: str, *, phrases: bool) -> tuple[str, int]:
    """``text`` with its words apart, each with a space of its own on both sides, and how many
    words it has. For a query with a phrase, the words are split out and joined by exactly two
    spaces (a phrase is counted across any separators); otherwise each separator becomes two
    spaces, in C and without a split, and the words are counted as runs of separators (a run of
    three or more counts a little over one, which a length norm does not feel)."""
    single = f" {text.translate(_ASCII_SEPARATORS) if text.isascii() else _SEPARATOR.sub(' ', text)} "
    if phrases:
        words = single.split()
        return f" {'  '.join(words)} ", len(words)
    return single.replace(" ", "  "), max(single.count(" ") - single.count("  ") - 1, 1)


def _needle(literal: str, *, prefix: bool, cjk: bool) -> tuple[str, bool]:
    """What to count, and where: in the folded text itself (``True``: a CJK term) or in its
    :func:`_spaced` form (a word, a phrase, or a prefix open at its end)."""
    if cjk:
        return literal, True
    body = "  ".join(literal.split())
    return (f" {body}" if prefix else f" {body} "), False


def rank(candidates: Sequence[Candidate], parsed: ParsedQuery) -> list[tuple[int, float]]:
    """``(id, score)`` of ``candidates``, best first (ties: newest first)."""
    if not candidates:
        return []
    terms = parsed.positive
    needles = [_needle(folded(t.literal), prefix=t.prefix, cjk=t.cjk) for t in terms]
    phrases = any(len(t.tokens) > 1 and not t.cjk for t in terms)
    texts: list[tuple[int, str, str, float, float]] = []
    for c in candidates:
        text = folded(c.text)
        spaced, words = _spaced(text, phrases=phrases)
        scale = c.chars / len(c.text) if c.chars > len(c.text) > 0 else 1.0
        texts.append((c.id, text, spaced, scale, max(words * scale, 1.0)))
    avg = sum(t[4] for t in texts) / len(texts)
    scored: list[tuple[int, float]] = []
    for cid, text, spaced, scale, length in texts:
        norm = K1 * (1 - B + B * length / avg)
        score = 0.0
        for needle, in_text in needles:
            tf = max(1.0, (text if in_text else spaced).count(needle) * scale)
            score += tf * (K1 + 1) / (tf + norm)
        scored.append((cid, score))
    return sorted(scored, key=lambda s: (-s[1], -s[0]))
