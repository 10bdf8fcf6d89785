"""Our search query language, parsed here and translated to FTS5 MATCH or a PostgreSQL tsquery.

Syntax: ``words``, ``"a phrase"``, ``-excluded`` (a word or a phrase), ``prefix*``.
Everything else is literal text: operators such as ``AND``/``NEAR`` are searched as
words, punctuation separates words. Only letters and digits ever reach the database,
each inside quotes, so no input can produce an FTS or SQL syntax error.

A query is answered in two tiers (see :mod:`gateway.store.search_ops`):

1. **words**: every term as a word (a phrase as words in order, ``prefix*`` as a word's
   start); a term written in CJK characters as the phrase of its characters, which
   finds it inside a sentence;
2. **substrings**, for what the words tier did not find: every term of at least
   :data:`MIN_SUBSTRING` characters anywhere in the text (part of an identifier, the
   middle of a word); shorter and CJK terms still as in tier 1.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from gateway.store.search_index import is_cjk

MAX_TERMS = 32
MIN_SUBSTRING = 3
"""Shortest term the substring (trigram) index can look for."""
MAX_TOKEN_CHARS = 128
_TOKEN = re.compile(r"[^\W_]+")  # letters and digits; `_` separates, as in both tokenizers


@dataclass(frozen=True, slots=True)
class Term:
    """One search term: a word (one token) or a phrase (several), maybe a prefix, maybe excluded."""

    tokens: tuple[str, ...]
    prefix: bool = False
    negated: bool = False

    @property
    def cjk(self) -> bool:
        """Written in CJK characters only: matched character by character (the ``cjk`` index)."""
        return all(is_cjk(tok) for tok in self.tokens)

    @property
    def literal(self) -> str:
        """What the substring tier looks for: the tokens, one space apart."""
        return " ".join(self.tokens)

    @property
    def substring(self) -> bool:
        """Looked for as a substring in tier 2 (long enough, and not CJK)."""
        return not self.cjk and len(self.literal) >= MIN_SUBSTRING


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    terms: tuple[Term, ...]

    @property
    def positive(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if not t.negated)

    @property
    def negative(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if t.negated)

    @property
    def usable(self) -> bool:
        """False when nothing could match: no term to look for (exclusions alone select nothing)."""
        return bool(self.positive)

    @property
    def has_substrings(self) -> bool:
        """Whether tier 2 can find anything tier 1 did not: a positive term is a substring term."""
        return any(t.substring for t in self.positive)


def tokens_of(text: str) -> tuple[str, ...]:
    return tuple(tok[:MAX_TOKEN_CHARS] for tok in _TOKEN.findall(text))


def parse(query: str) -> ParsedQuery:
    """Split ``query`` into terms; never raises."""
    text = unicodedata.normalize("NFC", query.replace("\x00", " "))
    terms: list[Term] = []
    i, n = 0, len(text)
    while i < n and len(terms) < MAX_TERMS:
        if text[i].isspace():
            i += 1
            continue
        negated = False
        while i < n and text[i] == "-":
            negated = True
            i += 1
        if i < n and text[i] == '"':
            end = text.find('"', i + 1)
            end = n if end < 0 else end
            raw, i = text[i + 1 : end], end + 1
            prefix = i < n and text[i] == "*"
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] != '"':
                i += 1
            raw = text[start:i]
            prefix = raw.endswith("*")
        tokens = tokens_of(raw)
        if tokens:
            terms.append(Term(tokens=tokens, prefix=prefix, negated=negated))
    return ParsedQuery(terms=tuple(terms))


def _fts5_phrase(tokens: tuple[str, ...] | list[str], prefix: bool = False) -> str:
    phrase = '"' + " ".join(tokens).replace('"', '""') + '"'
    return phrase + " *" if prefix else phrase


def _fts5_term(term: Term) -> str:
    """``term`` against ``messages_fts``: its ``text`` column, or ``cjk`` character by character."""
    if term.cjk:
        return "(" + " AND ".join("cjk : " + _fts5_phrase(list(tok)) for tok in term.tokens) + ")"
    return "text : " + _fts5_phrase(term.tokens, term.prefix)


def _fts5(positive: tuple[Term, ...], negative: tuple[Term, ...]) -> str:
    expression = "(" + " AND ".join(_fts5_term(t) for t in positive) + ")"
    return expression + "".join(" NOT " + _fts5_term(t) for t in negative)


def to_fts5(parsed: ParsedQuery) -> str | None:
    """Tier 1 as an FTS5 MATCH on ``messages_fts``; ``None`` when the query cannot match anything."""
    if not parsed.usable:
        return None
    return _fts5(parsed.positive, parsed.negative)


def fts5_any(terms: tuple[Term, ...]) -> str | None:
    """A MATCH on ``messages_fts`` for rows where any of ``terms`` occurs as in tier 1."""
    return " OR ".join(_fts5_term(t) for t in terms) or None


def fts5_all(terms: tuple[Term, ...]) -> str | None:
    """A MATCH on ``messages_fts`` for rows where every one of ``terms`` occurs as in tier 1."""
    return " AND ".join(_fts5_term(t) for t in terms) or None


def fts5_substrings(parsed: ParsedQuery) -> str | None:
    """Tier 2's candidates as a MATCH on the trigram table: rows holding every trigram of every
    positive substring term. The table keeps no positions (``detail=none``), so this is a
    superset; :func:`substring_checks` decides."""
    positive = [t for t in parsed.positive if t.substring]
    if not positive:
        return None
    trigrams = dict.fromkeys(tri for t in positive for tri in _covering_trigrams(t.literal))
    return " AND ".join(_fts5_phrase([tri]) for tri in trigrams)


def _covering_trigrams(literal: str) -> list[str]:
    """Trigrams that cover every character of ``literal`` (every third, and the last): each
    one read costs its whole row list, and the check on the text rejects what they let by."""
    starts = [*range(0, len(literal) - 2, 3), len(literal) - 3]
    return [literal[i : i + 3] for i in dict.fromkeys(starts)]


@dataclass(frozen=True, slots=True)
class SubstringCheck:
    """How SQLite checks a substring term on a trigram candidate's text: ``LIKE`` (ASCII case
    folding, fast) for a term of ASCII characters, else ``GLOB`` with both cases of each letter
    (SQLite's LIKE folds ASCII only; a class per letter is several times slower, so only there)."""

    operator: str
    pattern: str


def substring_checks(parsed: ParsedQuery) -> tuple[list[SubstringCheck], list[SubstringCheck]]:
    """What a row's indexed text must hold (each positive substring term) and must not (each
    excluded one), folding case as the trigram tokenizer does."""
    positive = [_check(t.literal) for t in parsed.positive if t.substring]
    return positive, [_check(t.literal) for t in parsed.negative if t.substring]


def _check(literal: str) -> SubstringCheck:
    # Terms hold letters, digits and single spaces only (``_TOKEN``): no wildcard to escape.
    if literal.isascii():
        return SubstringCheck("LIKE", f"%{literal}%")
    out = []
    for ch in literal:
        cases = sorted({c for c in (ch, ch.lower(), ch.upper()) if len(c) == 1})
        out.append(ch if len(cases) == 1 else "[" + "".join(cases) + "]")
    return SubstringCheck("GLOB", "*" + "".join(out) + "*")


def _lexeme(token: str) -> str:
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def _ts_term(term: Term) -> str:
    if term.cjk:
        return (
            "(" + " & ".join("(" + " <-> ".join(_lexeme(ch) for ch in tok) + ")" for tok in term.tokens) + ")"
        )
    lexemes = [_lexeme(tok) for tok in term.tokens]
    if term.prefix:
        lexemes[-1] += ":*"
    return "(" + " <-> ".join(lexemes) + ")"


def _tsquery(terms: tuple[Term, ...], *, cjk: bool, negated: bool = False) -> str | None:
    """Text for ``to_tsquery('simple', :q)`` over the terms of one index (words, or CJK characters).

    All ``terms`` must occur (``negated``: none of them may; the caller applies the NOT).
    """
    parts = [_ts_term(t) for t in terms if t.cjk == cjk]
    return (" | " if negated else " & ").join(parts) or None


@dataclass(frozen=True, slots=True)
class TsQueries:
    """Tier 1 on PostgreSQL: what ``text_tsv`` and the CJK vector must match, and must not."""

    words: str | None
    cjk: str | None
    not_words: str | None
    not_cjk: str | None


def to_tsqueries(parsed: ParsedQuery) -> TsQueries | None:
    """Tier 1 as tsqueries, or ``None`` when the query cannot match anything."""
    if not parsed.usable:
        return None
    return TsQueries(
        words=_tsquery(parsed.positive, cjk=False),
        cjk=_tsquery(parsed.positive, cjk=True),
        not_words=_tsquery(parsed.negative, cjk=False, negated=True),
        not_cjk=_tsquery(parsed.negative, cjk=True, negated=True),
    )


def ts_any(terms: tuple[Term, ...], *, cjk: bool) -> str | None:
    """A tsquery matching rows where any of ``terms`` (those of one index) occurs."""
    return _tsquery(terms, cjk=cjk, negated=True)


def ts_all(terms: tuple[Term, ...], *, cjk: bool) -> str | None:
    """A tsquery matching rows where every one of ``terms`` (those of one index) occurs."""
    return _tsquery(terms, cjk=cjk)


def like_pattern(term: Term) -> str:
    """An ILIKE pattern for ``term`` anywhere (its literal holds only letters, digits and spaces)."""
    return "%" + term.literal + "%"
