"""Markdown-ish -> Telegram HTML, checked with Telegram's own parsing rules (tests/fakes/telegram_html.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.platforms.telegram_bot.format import escape, to_telegram_html
from gateway.splitter import split_message, utf16_len
from tests.fakes.telegram_html import EntityParseError, parse_html


def entities(markdown: str) -> list[tuple[str, str]]:
    plain, found = parse_html(to_telegram_html(markdown))
    units = plain.encode("utf-16-le")
    return [
        (e["type"], units[e["offset"] * 2 : (e["offset"] + e["length"]) * 2].decode("utf-16-le"))
        for e in found
    ]


def test_only_angle_brackets_and_ampersand_are_escaped() -> None:
    assert escape("a < b > c & d \" ' ") == "a &lt; b &gt; c &amp; d \" ' "
    assert to_telegram_html("x < y && z > 0") == "x &lt; y &amp;&amp; z &gt; 0"


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("**bold**", [("bold", "bold")]),
        ("__bold__", [("bold", "bold")]),
        ("*italic*", [("italic", "italic")]),
        ("_italic_", [("italic", "italic")]),
        ("~~gone~~", [("strikethrough", "gone")]),
        ("`a <b>`", [("code", "a <b>")]),
        ("# Heading", [("bold", "Heading")]),
        ("***both***", [("bold", "both"), ("italic", "both")]),
    ],
)
def test_inline_markdown_becomes_entities(markdown: str, expected: list[tuple[str, str]]) -> None:
    assert sorted(entities(markdown)) == sorted(expected)


def test_fenced_code_becomes_pre_with_its_language() -> None:
    html = to_telegram_html("Look:\n```python\nif a < b:\n    pass\n```\nDone")
    assert html == 'Look:\n<pre><code class="language-python">if a &lt; b:\n    pass</code></pre>\nDone'
    _, found = parse_html(html)
    assert found[0]["type"] == "pre" and found[0]["language"] == "python"


def test_fenced_code_without_language_is_plain_pre() -> None:
    assert to_telegram_html("```\nx = 1\n```") == "<pre>x = 1</pre>"


def test_markdown_inside_code_is_left_alone() -> None:
    assert to_telegram_html("`**not bold**`") == "<code>**not bold**</code>"
    assert to_telegram_html("```\n**raw** <tag>\n```") == "<pre>**raw** &lt;tag&gt;</pre>"


def test_links_keep_their_url_and_unsafe_schemes_stay_text() -> None:
    assert (
        to_telegram_html("[docs](https://ex.org/a?b=1&c=2)")
        == '<a href="https://ex.org/a?b=1&amp;c=2">docs</a>'
    )
    assert to_telegram_html("[x](javascript:alert(1))") == "[x](javascript:alert(1))"


def test_snake_case_and_arithmetic_are_not_emphasis() -> None:
    assert to_telegram_html("my_var_name and 2*3*4") == "my_var_name and 2*3*4"


def test_bullets_are_not_emphasis() -> None:
    assert to_telegram_html("* one\n* two") == "* one\n* two"


@pytest.mark.parametrize("markdown", ["**open only", "*a **b* c**", "__x", "`unclosed", "[label](", "~~a"])
def test_unbalanced_markdown_falls_back_to_escaped_text(markdown: str) -> None:
    plain, _ = parse_html(to_telegram_html(markdown))
    assert plain.replace("*", "").replace("_", "").replace("~", "") == markdown.replace("*", "").replace(
        "_", ""
    ).replace("~", "")


def test_the_fake_rejects_what_telegram_rejects() -> None:
    for bad in ["<b>x", "<b><i>x</b></i>", "<foo>x</foo>", "a < b", "AT&T", "<code><b>x</b></code>"]:
        with pytest.raises(EntityParseError):
            parse_html(bad)


TOKENS = [
    *list("ab xy*_~`[]()#<>&\"'\n:/."),
    "https://e.io",
    "```",
    "```py\n",
    "\n```\n",
    "🙂",
    "漢",
    "**",
    "__",
]
MARKDOWNISH = st.lists(st.sampled_from(TOKENS), max_size=60).map("".join)


@settings(max_examples=400, deadline=None)
@given(MARKDOWNISH)
def test_any_input_gives_html_telegram_accepts(markdown: str) -> None:
    plain, _ = parse_html(to_telegram_html(markdown))
    assert utf16_len(plain) <= utf16_len(markdown)  # a part within the limit stays within it


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.characters(exclude_characters="*_~`[#\r", exclude_categories=("Cs",)), max_size=200)
)
def test_text_without_markdown_comes_through_unchanged(text: str) -> None:
    plain, found = parse_html(to_telegram_html(text))
    assert plain == text
    assert found == []


@settings(max_examples=100, deadline=None)
@given(MARKDOWNISH, st.integers(40, 120))
def test_every_split_part_formats_to_valid_html(markdown: str, limit: int) -> None:
    for part in split_message(markdown, limit, measure=utf16_len):
        parse_html(to_telegram_html(part))
