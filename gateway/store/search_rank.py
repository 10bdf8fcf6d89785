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
and ``avg_len`` the mean over the ranked messages. Ties go to the newest. A word is a run of
letters and digits, as FTS5's ``unicode61`` cuts them. Counting whole words rather than the
term's text anywhere (``ko`` inside ``saiko``) is what makes the order agree with a BM25
ranking (docs/search.md has the figures).

The counting is string searches in C on UTF-8 bytes (an ASCII message is folded and cut into
words by one ``bytes.translate``, several times faster than ``str.translate``): 500 candidates
of a two-word query at 1,120,000 messages rank in ~2.5 ms.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
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


_SPACE = ord(" ")
_ASCII_WORDS = bytes(c if chr(c).isalnum() else _SPACE for c in range(128)).lower() + bytes(range(128, 256))
"""``bytes.translate`` table: an ASCII text folded (lower case) with each separator a space."""
_STR_WORDS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})
_SEPARATOR = re.compile(r"[\W_]+")


def _utf8(text: str) -> bytes:
    # UTF-8 keeps substring counts: a needle can only match on character boundaries.
    return text.encode("utf-8", "surrogatepass")


def _words(text: str) -> tuple[bytes, bytes]:
    """``text`` folded, and folded with each separator a space (a run of them one space when
    the folded text is not ASCII) and a space at each end; both UTF-8. An ASCII text's folded
    form is not returned (``b""``): only a CJK term is counted there, and it is never ASCII."""
    if text.isascii():
        return b"", b" " + text.encode("ascii").translate(_ASCII_WORDS) + b" "
    text = folded(text)
    spaced = text.translate(_STR_WORDS) if text.isascii() else _SEPARATOR.sub(" ", text)
    return _utf8(text), _utf8(f" {spaced} ")


@dataclass(frozen=True, slots=True)
class _Needle:
    """What to count for a term, UTF-8: ``text`` in the folded message (``cjk``) or in its
    words (a word ``" ko "``, a prefix open at its end ``" ko"``, or a phrase); ``twice``: a
    word's needle for two of it one space apart (empty for the others)."""

    text: bytes
    cjk: bool = False
    twice: bytes = b""


def _needle(literal: str, *, prefix: bool, cjk: bool, phrases: bool) -> _Needle:
    if cjk:
        return _Needle(_utf8(literal), cjk=True)
    body = _utf8("  ".join(literal.split()))
    if prefix:
        return _Needle(b" " + body)
    return _Needle(b" " + body + b" ", twice=b"" if phrases else b" " + body + b" " + body + b" ")


def _counts(text: str, needles: Sequence[_Needle]) -> tuple[list[int], int]:
    """How often each needle occurs in ``text`` (as read, unfolded), and its length in words,
    counted as runs of separators (a run of three or more counts a little over one, which a
    length norm does not feel).

    A word's needle ``" ko "`` overlaps itself only on a space, so a plain count misses an
    occurrence exactly when two stand one space apart (``twice`` is in the text); only then
    are the spaces doubled. A prefix's ``" ko"`` cannot overlap itself.
    """
    if text.isascii():  # most messages: no folded copy needed (a CJK term is never ASCII)
        whole, single = b"", b" " + text.encode("ascii").translate(_ASCII_WORDS) + b" "
    else:
        whole, single = _words(text)
    out: list[int] = []
    for n in needles:
        if n.cjk:
            out.append(whole.count(n.text))
        elif (found := single.count(n.text)) and n.twice and n.twice in single:
            out.append(single.replace(b" ", b"  ").count(n.text))
        else:
            out.append(found)
    words = single.count(b" ") - single.count(b"  ") - 1
    return out, words if words > 1 else 1


def _phrase_counts(text: str, needles: Sequence[_Needle]) -> tuple[list[int], int]:
    """:func:`_counts` for a query with a phrase: the words split out and joined by exactly two
    spaces, so a phrase is counted across any separators."""
    whole, single = _words(text)
    if not whole:
        whole = _utf8(folded(text))
    words = single.split()
    spaced = b" " + b"  ".join(words) + b" "
    return [(whole if n.cjk else spaced).count(n.text) for n in needles], len(words)


def rank(candidates: Sequence[Candidate], parsed: ParsedQuery) -> list[tuple[int, float]]:
    """``(id, score)`` of ``candidates``, best first (ties: newest first)."""
    if not candidates:
        return []
    terms = parsed.positive
    phrases = any(len(t.tokens) > 1 and not t.cjk for t in terms)
    needles = [_needle(folded(t.literal), prefix=t.prefix, cjk=t.cjk, phrases=phrases) for t in terms]
    # A word the counts above cannot vouch for (nothing left once folded) is counted with
    # every separator doubled, the way phrases are.
    general = phrases or any(not n.cjk and not n.text.strip() for n in needles)
    count: Callable[[str, Sequence[_Needle]], tuple[list[int], int]] = _phrase_counts if general else _counts
    tallies: list[tuple[int, list[int], float, float]] = []
    for c in candidates:
        found, words = count(c.text, needles)
        chars = len(c.text)
        scale = c.chars / chars if c.chars > chars > 0 else 1.0
        tallies.append((c.id, found, scale, max(words * scale, 1.0)))
    avg = sum([t[3] for t in tallies]) / len(tallies)
    k1b = K1 + 1
    scored: list[tuple[float, int]] = []
    for cid, found, scale, length in tallies:
        norm = K1 * (1 - B + B * length / avg)
        score = 0.0
        for n in found:
            tf = n * scale
            if tf < 1.0:  # the index matched it: at least once
                tf = 1.0
            score += tf * k1b / (tf + norm)
        scored.append((-score, -cid))
    scored.sort()
    return [(-cid, -negative) for negative, cid in scored]
