"""No text is lost on the way to the chat: the visible text of the parts a reply is sent as
holds every non-whitespace character of the reply, in order, except markup that did its job.

"Visible" is what Telegram shows: the HTML parsed as the Bot API parses it
(tests/fakes/telegram_html.py), entities decoded, a link's URL counted where its label is.
What may vanish: emphasis and link punctuation (``* _ ~ [ ] ( ) #``) always; backticks and
fence lines only in a part that shows code (a ``code`` or ``pre`` entity). Every part shows
some of the reply, not only its "(1/3)" marker. For Discord (Markdown sent as it is) the parts
are the reply itself, so each must carry some of it besides the marker and fence repairs.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gateway.fences import next_fence_state
from gateway.platforms.telegram_bot.format import to_telegram_html
from gateway.splitter import join_parts, split_message, utf16_len
from tests.fakes.telegram_html import parse_html

MARKER = re.compile(r"^\(\d+/\d+\)[ \n]")
ALWAYS_DROPPABLE = set("*_~[]()#")
CODE_ENTITIES = {"code", "pre"}

ATOMS = st.one_of(
    st.sampled_from(
        [
            "`",
            "``",
            "```",
            "````",
            "~~~",
            "```python\n",
            "\n```\n",
            "\n",
            "\n\n",
            " ",
            "  ",
            "*",
            "**",
            "_",
            "__",
            "~~",
            "[",
            "]",
            "(",
            ")",
            "[link](https://example.com/a_b)",
            "# ",
            "<",
            ">",
            "&",
            "&amp;",
            "<b>",
            "word",
            "x",
            "é",
            "🙂",
            "👍🏽",
            "\u200d",
            "שלום",
            "2*3*4",
            "snake_case",
            "print(1)",
            "(1/2) ",
        ]
    ),
    st.integers(min_value=3, max_value=400).map(lambda n: "`" * n),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6),
)
REPLIES = st.lists(ATOMS, min_size=1, max_size=60).map("".join).filter(lambda t: bool(t.strip()))


def visible(part: str) -> tuple[str, set[str]]:
    """What Telegram shows for ``part`` (link URLs after their labels), and the entity kinds."""
    plain, entities = parse_html(to_telegram_html(part))
    units = plain.encode("utf-16-le")
    inserts = sorted(
        ((e["offset"] + e["length"], e["url"]) for e in entities if e["type"] == "text_link"), reverse=True
    )
    for end, url in inserts:
        units = units[: end * 2] + url.encode("utf-16-le") + units[end * 2 :]
    return units.decode("utf-16-le"), {e["type"] for e in entities}


def fence_line_positions(text: str) -> set[int]:
    """Positions in ``text`` on lines that open or close a fence."""
    positions: set[int] = set()
    state = None
    start = 0
    for line in text.split("\n"):
        new_state = next_fence_state(state, line.rstrip("\r"))
        if new_state is not state:
            positions.update(range(start, start + len(line)))
        state = new_state
        start += len(line) + 1
    return positions


def lost(part: str) -> list[str]:
    """The characters of ``part`` that its visible text does not show (beyond markup that worked)."""
    shown, kinds = visible(part)
    code = bool(kinds & CODE_ENTITIES)
    fences = fence_line_positions(part) if code else set()
    want = [
        (ch, ch in ALWAYS_DROPPABLE or (code and (ch == "`" or i in fences))) for i, ch in enumerate(part)
    ]
    want = [(ch, droppable) for ch, droppable in want if not ch.isspace()]
    have = [ch for ch in shown if not ch.isspace()]
    missing = _greedy_missing(want, have)
    # Greedy matching can spend a shown character on a droppable one (a fence line's "python")
    # that the next line, inside the block, really shows: then look for the best alignment.
    return _fewest_missing(want, have) if missing else missing


def _greedy_missing(want: list[tuple[str, bool]], have: list[str]) -> list[str]:
    missing: list[str] = []
    j = 0
    for ch, droppable in want:
        if j < len(have) and have[j] == ch:
            j += 1
        elif not droppable:
            missing.append(ch)
    return missing


def _fewest_missing(want: list[tuple[str, bool]], have: list[str]) -> list[str]:
    """Of every in-order alignment of ``have`` under ``want``, the one that misses the fewest
    characters that must be shown (dynamic programming from the end)."""
    n, m = len(want), len(have)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        ch, droppable = want[i]
        row, below = best[i], best[i + 1]
        for j in range(m, -1, -1):
            cost = below[j] + (0 if droppable else 1)
            if j < m and have[j] == ch:
                cost = min(cost, below[j + 1])
            row[j] = cost
    missing: list[str] = []
    i = j = 0
    while i < n:
        ch, droppable = want[i]
        if j < m and have[j] == ch and best[i][j] == best[i + 1][j + 1]:
            j += 1
        elif not droppable:
            missing.append(ch)
        i += 1
    return missing


def body(part: str, parts: int) -> str:
    return MARKER.sub("", part, count=1) if parts > 1 else part


@given(REPLIES, st.integers(min_value=48, max_value=400))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@example("```python\n```python\n", 48)  # the opener's info string matched where the content shows it
def test_telegram_parts_show_every_character_of_the_reply(reply: str, limit: int) -> None:
    parts = split_message(reply, limit, measure=utf16_len, max_parts=None)
    for part in parts:
        assert lost(part) == [], (part, visible(part)[0])
        assert visible(body(part, len(parts)))[0].strip(), part  # no part of only "(1/3)"


@given(REPLIES, st.integers(min_value=48, max_value=400))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
def test_discord_parts_each_carry_some_of_the_reply(reply: str, limit: int) -> None:
    parts = split_message(reply, limit, max_parts=None)
    assert join_parts(parts) == reply
    for part in parts:
        content = body(part, len(parts)).strip("\n")
        assert content.strip() and len(part) <= limit, part


def test_eight_thousand_backticks_are_shown_in_every_part() -> None:
    reply = "`" * 8000
    parts = split_message(reply, 4096, measure=utf16_len)
    shown = [visible(part)[0] for part in parts]
    assert len(parts) == 3 and all(text.count("`") > 3000 for text in shown), [len(s) for s in shown]


def test_a_fence_with_nothing_inside_is_shown_as_written() -> None:
    assert visible("```\n```")[0] == "```\n```"
    assert visible("```python\n")[0] == "```python\n"  # a streamed reply just after its opener
    assert visible("see:\n```\n   \n```\ndone")[0] == "see:\n```\n   \n```\ndone"
