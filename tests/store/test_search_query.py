"""The query language: parsing, and translations that can never be syntax errors."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.types import ChatMessage, SearchFilters
from gateway.store.repository import Store
from gateway.store.search_query import Term, parse, to_fts5, to_tsquery
from tests.store.helpers import new_session


def test_words_phrases_prefixes_and_exclusions_are_parsed() -> None:
    parsed = parse('alpha "beta gamma" delt* -omega -"x y"')
    assert parsed.terms == (
        Term(("alpha",)),
        Term(("beta", "gamma")),
        Term(("delt",), prefix=True),
        Term(("omega",), negated=True),
        Term(("x", "y"), negated=True),
    )


def test_punctuation_inside_a_word_makes_a_phrase() -> None:
    assert parse("foo-bar e.g.").terms == (Term(("foo", "bar")), Term(("e", "g")))


def test_fts5_translation_quotes_every_term() -> None:
    assert (
        to_fts5(parse('alpha "beta gamma" delt* -omega'))
        == '("alpha" AND "beta gamma" AND "delt" *) NOT "omega"'
    )


def test_tsquery_translation_uses_quoted_lexemes() -> None:
    assert to_tsquery(parse('alpha "beta gamma" delt* -omega')) == (
        "('alpha') & ('beta' <-> 'gamma') & ('delt':*) & !('omega')"
    )


@pytest.mark.parametrize("query", ["", "   ", "*", '"', "-word", "-", "🎉🎉", "\x00", "!!!"])
def test_queries_without_positive_terms_translate_to_nothing(query: str) -> None:
    assert to_fts5(parse(query)) is None and to_tsquery(parse(query)) is None


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_is_a_valid_fts5_query(query: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='unicode61 remove_diacritics 2')")
    conn.execute("INSERT INTO t(text) VALUES ('some text to match against')")
    match = to_fts5(parse(query))
    if match is not None:
        conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (match,)).fetchall()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
async def test_search_never_raises_on_any_text(store: Store, query: str) -> None:
    sid = await new_session(store, "hypothesis")
    if not await store.load_active(sid):
        await store.append_message(sid, ChatMessage.user("alpha beta gamma"))
    await store.search(query, SearchFilters(session_id=sid))
