"""The query language: parsing, and translations that can never be syntax errors."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.types import ChatMessage, SearchFilters
from gateway.store.repository import Store
from gateway.store.search_query import (
    SubstringCheck,
    Term,
    TsQueries,
    fts5_any,
    fts5_substrings,
    parse,
    substring_checks,
    to_fts5,
    to_tsqueries,
)
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
        == '(text : "alpha" AND text : "beta gamma" AND text : "delt" *) NOT text : "omega"'
    )


def test_cjk_terms_are_phrases_of_their_characters() -> None:
    assert to_fts5(parse("数据 -カタカナ")) == '((cjk : "数 据")) NOT (cjk : "カ タ カ ナ")'
    assert to_tsqueries(parse("数据 word")) == TsQueries(
        words="('word')", cjk="(('数' <-> '据'))", not_words=None, not_cjk=None
    )


def test_tsquery_translation_uses_quoted_lexemes() -> None:
    assert to_tsqueries(parse('alpha "beta gamma" delt* -omega -"x y"')) == TsQueries(
        words="('alpha') & ('beta' <-> 'gamma') & ('delt':*)",
        cjk=None,
        not_words="('omega') | ('x' <-> 'y')",
        not_cjk=None,
    )


def test_terms_of_three_characters_or_more_are_also_substrings() -> None:
    parsed = parse('ab userprofile "get user" 数据库 -xyz -q')
    assert [t.substring for t in parsed.terms] == [False, True, True, False, True, False]
    trigrams = ["use", "rpr", "ofi", "ile", "get", " us", "ser"]  # every third, and the last
    assert fts5_substrings(parsed) == " AND ".join(f'"{t}"' for t in trigrams)
    assert substring_checks(parsed) == (
        [SubstringCheck("LIKE", "%userprofile%"), SubstringCheck("LIKE", "%get user%")],
        [SubstringCheck("LIKE", "%xyz%")],
    )


def test_a_substring_with_letters_beyond_ascii_is_checked_with_both_cases_of_each() -> None:
    assert substring_checks(parse("Größe42"))[0] == [SubstringCheck("GLOB", "*[Gg][Rr][Öö]ß[Ee]42*")]


@pytest.mark.parametrize("query", ["", "   ", "*", '"', "-word", "-", "🎉🎉", "\x00", "!!!"])
def test_queries_without_positive_terms_translate_to_nothing(query: str) -> None:
    assert to_fts5(parse(query)) is None and to_tsqueries(parse(query)) is None


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_is_a_valid_fts5_query(query: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, cjk, tokenize='unicode61 remove_diacritics 2')")
    conn.execute("CREATE VIRTUAL TABLE g USING fts5(text, tokenize='trigram', detail=none)")
    conn.execute("INSERT INTO t(text, cjk) VALUES ('some text to match against', 'x 数 据')")
    conn.execute("INSERT INTO g(text) VALUES ('some text to match against')")
    parsed = parse(query)
    for table, match in (
        ("t", to_fts5(parsed)),
        ("t", fts5_any(parsed.terms)),
        ("g", fts5_substrings(parsed)),
    ):
        if match is not None:
            conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", (match,)).fetchall()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
async def test_search_never_raises_on_any_text(store: Store, query: str) -> None:
    sid = await new_session(store, "hypothesis")
    if not await store.load_active(sid):
        await store.append_message(sid, ChatMessage.user("alpha beta gamma"))
    await store.search(query, SearchFilters(session_id=sid))
