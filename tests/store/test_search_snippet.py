"""Snippets: a window around the first match, every match marked, markers always ours."""

from __future__ import annotations

import re
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.types import HIT_END, HIT_START, snippet_parts
from gateway.store import search_snippet
from gateway.store.search_query import parse
from gateway.store.search_snippet import SNIPPET_CHARS, fold, make_snippet, match_spans, term_pattern


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


def test_a_match_that_begins_just_before_the_window_ends_is_marked_up_to_the_cut() -> None:
    text = "ko" + "_" * 157 + "ko" + "_" * 300  # no space to move the cut onto: it falls inside "ko"
    assert marked(make_snippet(text, parse("ko"))) == ["ko", "k"]


# ---- the matches are looked for where a term's first word is, not at every position ---------

_WORDS = [
    "ko",
    "Ko",
    "kó",
    "saiko",
    "kokoro",
    "red",
    "car",
    "Straße",
    "strasse",
    "数据库",
    "getUserProfile",
    "aaa",
]
_GLUE = [" ", "  ", ", ", " - ", "_", "\n", "...", "、"]
_texts = st.lists(st.tuples(st.sampled_from(_WORDS), st.sampled_from(_GLUE)), min_size=40, max_size=150).map(
    lambda parts: "".join(w + g for w, g in parts)
)
_queries = st.lists(
    st.tuples(
        st.sampled_from(["ko", "red", "car", "strasse", "数据", "userprofile", "sai", "aa"]),
        st.integers(0, 2),
    ),
    min_size=1,
    max_size=3,
).map(lambda terms: " ".join([w, w + "*", f'"red {w}"'][form] for w, form in terms))


def _every_match(text: str, query: str, substring: bool) -> list[tuple[int, int]]:
    """The spans a plain ``finditer`` over every position finds (how snippets first looked)."""
    terms = parse(query).positive
    pattern = re.compile("|".join(f"(?:{term_pattern(t, substring=substring)})" for t in terms))
    folded, where = fold(text)
    where.append(len(text))
    return [
        (where[m.start()], where[m.end() - 1] + 1) for m in pattern.finditer(folded) if m.end() > m.start()
    ]


@settings(max_examples=300, deadline=None)
@given(_texts, _queries, st.booleans())
def test_the_matches_found_from_the_terms_first_words_are_every_match(
    text: str, query: str, substring: bool
) -> None:
    assert match_spans(text, parse(query).positive, substring=substring) == _every_match(
        text, query, substring
    )


@settings(max_examples=300, deadline=None)
@given(_texts, _queries, st.booleans())
def test_a_snippet_is_the_one_cut_when_the_pattern_is_tried_at_every_position(
    text: str, query: str, substring: bool
) -> None:
    parsed = parse(query)
    fast = make_snippet(text, parsed, substring=substring)
    with mock.patch.object(search_snippet, "_leads", lambda terms: ("",)):  # no lead: every position
        assert make_snippet(text, parsed, substring=substring) == fast
