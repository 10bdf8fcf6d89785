"""Snippets with marked matches, built in Python the same way on both engines.

The database finds and ranks the hits; this module quotes a window of each hit's text
around its first match and marks every match in it with :data:`~agent.types.HIT_START` /
:data:`~agent.types.HIT_END`. Any marker character already in the text is replaced
first, so a marker in a snippet is always ours. Matching here mirrors the index: case
and diacritics are ignored, a word matches a whole word (a ``prefix*`` its start), a
phrase its words in order with only separators between them, and in substring mode
(hits found by the substring index) any occurrence counts.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Iterable, Iterator

from agent.types import HIT_END, HIT_START
from gateway.store.search_query import ParsedQuery, Term

SNIPPET_CHARS = 160
"""About how many characters of a message a snippet quotes."""
_LEAD = SNIPPET_CHARS // 4
_SNAP = 20  # how far a cut may move to land on a space
_SEPARATORS = r"[\W_]+"
_WORD_BEFORE = r"(?<![^\W_])"
_WORD_AFTER = r"(?![^\W_])"


# The diacritics FTS5's ``remove_diacritics`` drops (Latin, Greek, Cyrillic accents); marks of
# other scripts (a kana's voicing) stay, as they do in the index.
_DIACRITICS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")


def folded(text: str) -> str:
    """``text`` without case or diacritics."""
    if text.isascii():
        return text.lower()
    return _DIACRITICS.sub("", unicodedata.normalize("NFD", text)).casefold()


def fold(text: str) -> tuple[str, list[int]]:
    """:func:`folded` ``text``, and for each of its characters the index it came from in ``text``."""
    if text.isascii():
        return text.lower(), list(range(len(text)))
    chars: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        one = ch.lower() if ch.isascii() else folded(ch)
        chars.append(one)
        where.extend([i] * len(one))
    return "".join(chars), where


def term_pattern(term: Term, *, substring: bool = False) -> str:
    """A regex finding ``term`` in :func:`folded` text, as the index matches it."""
    tokens = [re.escape(folded(tok)) for tok in term.tokens]
    body = _SEPARATORS.join(tokens)
    if substring or term.cjk:  # a CJK word is found inside a run of CJK characters
        return body
    return _WORD_BEFORE + body + (r"[^\W_]*" if term.prefix else _WORD_AFTER)


@functools.lru_cache(maxsize=256)
def _pattern(terms: tuple[Term, ...], substring: bool) -> re.Pattern[str] | None:
    """One regex for every term (built once per query: a page of hits shares it)."""
    if not terms:
        return None
    return re.compile("|".join(f"(?:{term_pattern(t, substring=substring)})" for t in terms))


@functools.lru_cache(maxsize=256)
def _leads(terms: tuple[Term, ...]) -> tuple[str, ...]:
    """What each term's match begins with, folded: its first word."""
    return tuple(folded(t.tokens[0]) for t in terms)


_SHORT = 256
"""Text left to search below which the pattern alone is cheaper than finding the leads first."""
_MISSES = 8
"""Places where a lead stands but no match does (``ko`` in ``kokoro``) before the pattern is
left to find the rest itself: past a few, trying each costs more than the regex's own scan."""


def _matches(
    pattern: re.Pattern[str], leads: tuple[str, ...], folded: str, start: int, stop: int
) -> Iterator[re.Match[str]]:
    """The matches beginning between ``start`` and ``stop`` of ``folded``, in order and not
    overlapping, as ``pattern.finditer(folded, start)`` gives them.

    The pattern's lookarounds keep the regex engine from skipping ahead: it tries every position
    (~20 ns a character), and past the last match it reads on to the end of the text. A match
    can only begin where a term's first word (its lead) does, and finding that is a string
    search in C: the pattern is tried at those places only, and none is looked for past ``stop``.
    """
    if not all(leads) or len(folded) - start < _SHORT:  # a lead to find first, and text worth it
        yield from _every(pattern, folded, start, stop)
        return
    # Where each lead is next, at or after the last place tried (-1: nowhere before ``stop``);
    # a lead beginning before ``stop`` ends before ``stop + len(lead)``.
    ends = [stop + len(lead) - 1 for lead in leads]
    nexts = [folded.find(lead, start, end) for lead, end in zip(leads, ends, strict=True)]
    misses = 0
    while live := [i for i in nexts if i >= 0]:
        at = min(live)
        found = pattern.match(folded, at)  # its lookbehind still sees what is before ``at``
        if found is not None:
            yield found
        elif (misses := misses + 1) > _MISSES:
            yield from _every(pattern, folded, at + 1, stop)
            return
        resume = at + 1 if found is None else found.end()
        nexts = [
            i if i < 0 or i >= resume else folded.find(lead, resume, end)
            for i, lead, end in zip(nexts, leads, ends, strict=True)
        ]


def _every(pattern: re.Pattern[str], folded: str, start: int, stop: int) -> Iterator[re.Match[str]]:
    """:func:`_matches` by the pattern alone, tried at every position."""
    for found in pattern.finditer(folded, start):
        if found.start() >= stop:
            return
        yield found


def match_spans(text: str, terms: Iterable[Term], *, substring: bool = False) -> list[tuple[int, int]]:
    """Where the terms occur in ``text``: sorted, non-overlapping ``(start, stop)`` spans."""
    terms = tuple(terms)
    pattern = _pattern(terms, substring)
    if pattern is None:
        return []
    folded, where = _folded_with_map(text)
    return _spans(pattern, _leads(terms), folded, where, 0, len(text))


def _folded_with_map(text: str) -> tuple[str, list[int] | None]:
    """:func:`fold` ``text``, its map closed by ``len(text)``; ``None`` for ASCII, whose folding
    keeps every index."""
    if text.isascii():
        return text.lower(), None
    folded, where = fold(text)
    where.append(len(text))
    return folded, where


def _spans(
    pattern: re.Pattern[str],
    leads: tuple[str, ...],
    folded: str,
    where: list[int] | None,
    start: int,
    stop: int,
) -> list[tuple[int, int]]:
    """The matches beginning between ``start`` and ``stop`` of the text, as text spans (lookbehinds
    still see what is before ``start``)."""
    if where is not None:  # the map never decreases: text bounds to folded ones by bisection
        start, stop = bisect.bisect_left(where, start), bisect.bisect_left(where, stop)
    spans: list[tuple[int, int]] = []
    for found in _matches(pattern, leads, folded, start, stop):
        if found.end() > found.start():
            a, b = found.span()
            spans.append((a, b) if where is None else (where[a], where[b - 1] + 1))
    return spans


def _cut(text: str, start: int, stop: int) -> tuple[int, int]:
    """``start``/``stop`` moved (a little) onto spaces, so words are not cut in half."""
    if start > 0:
        space = text.rfind(" ", max(0, start - _SNAP), start + 1)
        start = space + 1 if space >= 0 else start
    if stop < len(text):
        space = text.find(" ", stop, stop + _SNAP)
        stop = space if space >= 0 else stop
    return start, stop


def make_snippet(text: str, parsed: ParsedQuery, *, substring: bool = False) -> str:
    """A window of ``text`` around its first match, matches marked, whitespace collapsed."""
    text = text.replace(HIT_START, "\ufffd").replace(HIT_END, "\ufffd")
    pattern = _pattern(parsed.positive, substring)
    leads = _leads(parsed.positive)
    folded, where = _folded_with_map(text)
    found = None if pattern is None else next(_matches(pattern, leads, folded, 0, len(folded)), None)
    first = 0 if found is None else found.start() if where is None else where[found.start()]
    start, stop = _cut(text, max(0, first - _LEAD), max(0, first - _LEAD) + SNIPPET_CHARS)
    # Only the matches the window shows: a long message is not searched to its end.
    spans = [] if pattern is None else _spans(pattern, leads, folded, where, start, stop)
    out: list[str] = ["… "] if start > 0 else []
    at = start
    for a, b in spans:
        if b <= start or a < at:
            continue
        if a >= stop:
            break
        b = min(b, stop)
        out += [text[at:a], HIT_START, text[a:b], HIT_END]
        at = b
    out.append(text[at:stop])
    if stop < len(text):
        out.append(" …")
    return " ".join("".join(out).split())
