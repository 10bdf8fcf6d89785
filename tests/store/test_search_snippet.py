"""Snippets: a window around the first match, every match marked, markers always ours."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent.types import HIT_END, HIT_START, snippet_parts
from gateway.store.search_query import parse
from gateway.store.search_snippet import SNIPPET_CHARS, fold, make_snippet


def marked(snippet: str) -> list[str]:
    return [text for text, match in snippet_parts(snippet) if match]


def test_words_phrases_and_prefixes_are_marked_ignoring_case_and_accents() -> None:
    text = "Le Café, the STAGING-cluster and deployment; cafeteria stays unmarked"
    assert marked(make_snippet(text, parse('cafe "staging cluster" deploy*'))) == [
        "Café",
        "STAGING-cluster",
        "deployment",
    ]


def test_substring_mode_marks_inside_words() -> None:
    assert marked(make_snippet("call getUserProfileById()", parse("userprofile"), substring=True)) == [
        "UserProfile"
    ]


def test_a_match_deep_in_a_long_text_is_quoted_with_ellipses() -> None:
    text = "filler " * 500 + "needle " + "more " * 500
    snippet = make_snippet(text, parse("needle"))
    assert marked(snippet) == ["needle"]
    assert snippet.startswith("… ") and snippet.endswith(" …")
    assert len(snippet) <= SNIPPET_CHARS + 10


def test_folding_keeps_a_map_back_to_the_original() -> None:
    folded, where = fold("Straße É")
    assert folded == "strasse e" and len(where) == len(folded)
    assert where[folded.index("ss")] == 4


@given(st.text(), st.text(max_size=30))
def test_markers_come_in_pairs_and_only_from_the_snippet_builder(text: str, query: str) -> None:
    snippet = make_snippet(text, parse(query))
    assert snippet.count(HIT_START) == snippet.count(HIT_END)
    parts = snippet_parts(snippet)
    assert all(HIT_START not in p and HIT_END not in p for p, _ in parts)
    assert "".join(p for p, _ in parts).replace("… ", "").replace(" …", "") in " ".join(
        text.replace(HIT_START, "\ufffd").replace(HIT_END, "\ufffd").split()
    )
