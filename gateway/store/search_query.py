"""Our search query language, parsed here and translated to FTS5 MATCH or a PostgreSQL tsquery.

Syntax: ``words``, ``"a phrase"``, ``-excluded`` (a word or a phrase), ``prefix*``.
Everything else is literal text: operators such as ``AND``/``NEAR`` are searched as
words, punctuation separates words. Only letters and digits ever reach the database,
each inside quotes, so no input can produce an FTS or SQL syntax error.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

MAX_TERMS = 32
MAX_TOKEN_CHARS = 128
_TOKEN = re.compile(r"[^\W_]+")  # letters and digits; `_` separates, as in both tokenizers


@dataclass(frozen=True, slots=True)
class Term:
    """One search term: a word (one token) or a phrase (several), maybe a prefix, maybe excluded."""

    tokens: tuple[str, ...]
    prefix: bool = False
    negated: bool = False


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


def _fts5_term(term: Term) -> str:
    phrase = '"' + " ".join(term.tokens).replace('"', '""') + '"'
    return phrase + " *" if term.prefix else phrase


def to_fts5(parsed: ParsedQuery) -> str | None:
    """An FTS5 MATCH expression, or ``None`` when the query cannot match anything."""
    if not parsed.usable:
        return None
    expression = "(" + " AND ".join(_fts5_term(t) for t in parsed.positive) + ")"
    for term in parsed.negative:
        expression += " NOT " + _fts5_term(term)
    return expression


def _lexeme(token: str) -> str:
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def _ts_term(term: Term) -> str:
    lexemes = [_lexeme(tok) for tok in term.tokens]
    if term.prefix:
        lexemes[-1] += ":*"
    return "(" + " <-> ".join(lexemes) + ")"


def to_tsquery(parsed: ParsedQuery) -> str | None:
    """Text for ``to_tsquery('simple', :q)``, or ``None`` when the query cannot match anything."""
    if not parsed.usable:
        return None
    parts = [_ts_term(t) for t in parsed.positive]
    parts += ["!" + _ts_term(t) for t in parsed.negative]
    return " & ".join(parts)
