"""The shared message splitter: limits, boundary preference, fences, markers, and its inverse."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.splitter import MIN_LIMIT, fence_state, join_parts, split_message, utf16_len

MARKER = re.compile(r"^\((\d+)/(\d+)\)[ \n]")
FAMILY = "👨\u200d👩\u200d👧\u200d👦"
CONTINUATIONS = ("\u200d", "\ufe0f", "\U0001f3fd")


def body(part: str) -> str:
    m = MARKER.match(part)
    assert m is not None, part
    return part[m.end() :]


# --- unit tests -------------------------------------------------------------------------------


def test_text_that_fits_is_returned_unchanged_without_marker() -> None:
    assert split_message("hello world", 4096) == ["hello world"]


def test_empty_text_gives_no_parts() -> None:
    assert split_message("", 100) == []


def test_limit_below_minimum_is_refused() -> None:
    with pytest.raises(ValueError):
        split_message("x" * 100, MIN_LIMIT - 1)


def test_parts_are_marked_and_the_marker_counts_in_the_limit() -> None:
    text = " ".join(f"word{i}" for i in range(200))
    parts = split_message(text, 100, max_parts=None)
    n = len(parts)
    assert n > 1
    for i, part in enumerate(parts, 1):
        assert part.startswith(f"({i}/{n}) ")
        assert len(part) <= 100


def test_unmarked_parts_have_no_marker() -> None:
    text = " ".join(f"word{i}" for i in range(200))
    parts = split_message(text, 100, mark_parts=False, max_parts=None)
    assert all(not MARKER.match(p) for p in parts)
    assert "".join(parts) == text


def test_paragraph_boundary_is_preferred_over_line_and_word() -> None:
    para1 = "First paragraph line one.\nline two goes on " + "a" * 10
    para2 = "Second paragraph with several words in it"
    text = para1 + "\n\n" + para2
    parts = split_message(text, len(para1) + 12)
    assert body(parts[0]) == para1 + "\n\n"
    assert body(parts[1]) == para2


def test_line_boundary_is_preferred_over_sentence() -> None:
    text = "One. Two three four five six.\nSeven eight nine ten eleven twelve thirteen."
    parts = split_message(text, 45)
    assert body(parts[0]) == "One. Two three four five six.\n"


def test_sentence_boundary_is_preferred_over_word() -> None:
    text = "This is the first sentence here. And the second sentence runs on and on for a while"
    parts = split_message(text, 50)
    assert body(parts[0]) == "This is the first sentence here. "


def test_words_are_not_cut_when_a_space_is_available() -> None:
    words = [f"w{i:03d}" for i in range(60)]
    parts = split_message(" ".join(words), 40, max_parts=None)
    rebuilt = [w for p in parts for w in body(p).split()]
    assert rebuilt == words


def test_a_long_word_is_hard_split() -> None:
    text = "x" * 250
    parts = split_message(text, 60, max_parts=None)
    assert all(len(p) <= 60 for p in parts)
    assert join_parts(parts) == text


def test_length_is_measured_in_utf16_units_when_asked() -> None:
    text = "🙂" * 100  # 200 UTF-16 code units
    parts = split_message(text, 50, measure=utf16_len, max_parts=None)
    assert all(utf16_len(p) <= 50 for p in parts)
    assert len(parts) >= 5
    assert join_parts(parts) == text


def test_a_zwj_emoji_sequence_is_not_cut() -> None:
    text = FAMILY * 20
    parts = split_message(text, 40, measure=utf16_len, max_parts=None)
    for part in parts:
        chunk = body(part)
        assert chunk.count("\u200d") == 3 * chunk.count("👨")
        assert not chunk.startswith(CONTINUATIONS)
    assert join_parts(parts) == text


def test_a_split_code_fence_is_closed_and_reopened_with_its_language() -> None:
    code = "\n".join(f"print({i})" for i in range(40))
    text = f"Intro.\n\n```python\n{code}\n```\nDone."
    parts = split_message(text, 120, max_parts=None)
    assert len(parts) > 2
    for part in parts[1:-1]:
        assert body(part).startswith("```python\n")
        assert body(part).rstrip("\n").endswith("\n```")
    for part in parts:
        assert fence_state(body(part) + "\n") is None
    assert join_parts(parts) == text


def test_a_reopened_fence_puts_the_marker_on_its_own_line() -> None:
    code = "\n".join(f"line {i}" for i in range(40))
    parts = split_message(f"```\n{code}\n```", 80, max_parts=None)
    assert parts[1].startswith("(2/")
    assert body(parts[1]).startswith("```\n")
    assert parts[1][len("(2/") :].split(")", 1)[1].startswith("\n```")


def test_nine_thousand_characters_fit_in_three_telegram_messages() -> None:
    text = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 160)[:9000]
    parts = split_message(text, 4096, measure=utf16_len)
    assert len(parts) == 3
    assert all(utf16_len(p) <= 4096 for p in parts)
    assert join_parts(parts) == text


def test_many_parts_reserve_room_for_two_digit_markers() -> None:
    text = "abcdefghij " * 120
    parts = split_message(text, 40, max_parts=None)
    assert len(parts) >= 10
    assert all(len(p) <= 40 for p in parts)
    assert parts[-1].startswith(f"({len(parts)}/{len(parts)})")


def test_join_parts_rejects_a_missing_marker() -> None:
    with pytest.raises(ValueError):
        join_parts(["no marker", "(2/2) second"])


# --- properties -------------------------------------------------------------------------------

WORD = st.one_of(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=12),
    st.text(alphabet="漢字仮名交じり文中国語한국어", min_size=1, max_size=20),
    st.sampled_from(
        ["🙂", "🎉", FAMILY, "👍🏽", "🇫🇷", "🇯🇵🇺🇸", "❤️", "e\u0301", "a.", "b!", "ok?", "1*2", "_x_"]
    ),
    st.text(alphabet="x", min_size=30, max_size=200),
)
SEP = st.sampled_from([" ", " ", " ", "\n", "\n\n", ". ", "。", "\t", "  "])


@st.composite
def prose(draw: st.DrawFn) -> str:
    n = draw(st.integers(1, 40))
    return "".join(draw(WORD) + draw(SEP) for _ in range(n))


@st.composite
def fenced(draw: st.DrawFn) -> str:
    run = draw(st.sampled_from(["```", "```", "~~~", "````"]))
    lang = draw(st.sampled_from(["", "python", "js", "c++"]))
    lines = draw(st.lists(st.text(alphabet="abc xyz()=;{}`~\t🙂", max_size=60), max_size=15))
    closed = draw(st.booleans())
    inner = "".join(line + "\n" for line in lines)
    return f"{run}{lang}\n{inner}" + (f"{run}\n" if closed else "")


DOCUMENT = st.lists(st.one_of(prose(), fenced()), min_size=1, max_size=8).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=DOCUMENT, limit=st.integers(40, 400), utf16=st.booleans())
def test_every_part_fits_and_the_parts_rebuild_the_text(text: str, limit: int, utf16: bool) -> None:
    measure = utf16_len if utf16 else len
    parts = split_message(text, limit, measure=measure, max_parts=None)
    assert all(measure(p) <= limit for p in parts)
    assert join_parts(parts) == text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=DOCUMENT, limit=st.integers(40, 400))
def test_every_part_but_the_last_closes_its_fences(text: str, limit: int) -> None:
    parts = split_message(text, limit, measure=utf16_len, max_parts=None)
    for part in parts[:-1]:
        assert fence_state(body(part) + "\n") is None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=DOCUMENT, limit=st.integers(40, 400))
def test_no_part_starts_inside_a_grapheme(text: str, limit: int) -> None:
    parts = split_message(text, limit, measure=utf16_len, max_parts=None)
    if len(parts) > 1:
        for part in parts:
            assert not body(part).startswith(CONTINUATIONS)
