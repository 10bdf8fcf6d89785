"""The splitter under attack: backtick and tilde storms, fence lines longer than the limit, surrogate
pairs, RTL and zero-width text. Bounded parts, every part within the limit, fences closed, never
raises, linear work (counted, not timed)."""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gateway.fences
import gateway.splitter
from gateway.splitter import DEFAULT_MAX_PARTS, fence_state, join_parts, split_message, utf16_len

MARKER = re.compile(r"^\((\d+)/(\d+)\)[ \n]")
TELEGRAM = (4096, utf16_len)
DISCORD = (2000, len)


def body(part: str) -> str:
    m = MARKER.match(part)
    return part[m.end() :] if m is not None else part


ATOMS = st.sampled_from(
    [
        "`", "``", "```", "````", "~~~", "~~~~", "~", "\n", "\n\n", " ", "\t", "\r\n", "```python\n",
        "\n```\n", "   ```", "    ```", "``` x ` y\n", "word ", "end. ", "🙂", "👨\u200d👩\u200d👧\u200d👦",
        "🇫🇷", "👍🏽", "❤️", "\u200d", "\u200b", "\u200c", "\ufeff", "\u200f", "\u202e", "\u2066",
        "שלום עולם ", "مرحبا بالعالم ", "e\u0301", "\ufe0f", "𝒳𝒴", "漢字", "\ud83d", "\udc4d",
    ]
)  # fmt: skip
RUNS = st.builds(
    lambda ch, k: ch * k,
    st.sampled_from(["`", "~", "x", " ", "\n", "🙂", "\u200d", "\u0301", "🇯", "א", "`\n", "~~~\n", "```x\n"]),
    st.integers(1, 1500),
)
ADVERSARIAL = st.lists(st.one_of(ATOMS, ATOMS, RUNS), min_size=1, max_size=40).map("".join)
LIMITS = st.one_of(
    st.sampled_from([TELEGRAM, DISCORD]),
    st.tuples(st.integers(32, 400), st.sampled_from([len, utf16_len])),
)


def check(text: str, limit: int, measure: Callable[[str], int], max_parts: int | None) -> list[str]:
    parts = split_message(text, limit, measure=measure, max_parts=max_parts)
    assert parts, "a non-empty text gives at least one part"
    assert all(measure(p) <= limit for p in parts)
    if max_parts is not None:
        assert len(parts) <= max_parts
    rebuilt = join_parts(parts)
    truncated = rebuilt != text
    assert text.startswith(rebuilt)
    if truncated:
        assert max_parts is not None and len(parts) == max_parts
    closing = parts if truncated else parts[:-1]
    for part in closing:
        assert fence_state(body(part) + "\n") is None, part[:200]
    return parts


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(text=ADVERSARIAL, limit=LIMITS, bounded=st.booleans())
def test_adversarial_text_splits_within_limits_with_fences_closed(
    text: str, limit: tuple[int, Callable[[str], int]], bounded: bool
) -> None:
    check(text, limit[0], limit[1], DEFAULT_MAX_PARTS if bounded else None)


@pytest.mark.full
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=ADVERSARIAL, limit=LIMITS, bounded=st.booleans())
def test_adversarial_text_splits_within_limits_full(
    text: str, limit: tuple[int, Callable[[str], int]], bounded: bool
) -> None:
    check(text, limit[0], limit[1], DEFAULT_MAX_PARTS if bounded else None)


def test_a_storm_of_backticks_becomes_a_few_discord_messages() -> None:
    parts = check("`" * 3031, *DISCORD, max_parts=None)
    assert len(parts) <= 3


def test_eight_thousand_backticks_fit_in_a_few_telegram_messages() -> None:
    parts = check("`" * 8000, *TELEGRAM, max_parts=None)
    assert len(parts) <= 4


def test_a_fence_line_longer_than_the_limit_does_not_raise() -> None:
    text = "```" + "x" * 5000 + "\nprint(1)\n```\nafter"
    parts = check(text, *DISCORD, max_parts=None)
    assert join_parts(parts) == text


def test_a_fence_opener_longer_than_a_fifth_of_the_part_is_reopened_by_its_run() -> None:
    opener = "```" + "python-with-a-very-long-info-string " * 5
    code = "\n".join(f"line {i} " + "x" * 40 for i in range(60))
    parts = check(f"{opener}\n{code}\n```\n", 600, len, max_parts=None)
    assert body(parts[0]).startswith(opener + "\n")
    assert all(body(p).startswith("```\n") for p in parts[1:])


def test_a_fence_is_reopened_with_its_own_opener_line() -> None:
    code = "\n".join(f"    return {i}" for i in range(300))
    parts = check(f"Here:\n\n~~~~ python\n{code}\n~~~~\nDone.", *DISCORD, max_parts=None)
    assert len(parts) > 2
    for part in parts[1:-1]:
        assert body(part).startswith("~~~~ python\n")
        assert body(part).endswith("\n~~~~")


def test_a_reply_needing_more_than_the_maximum_is_cut_with_a_note_on_how_to_get_the_rest() -> None:
    text = "\n\n".join(f"Paragraph {i}. " + "Words go on and on. " * 60 for i in range(80))
    parts = split_message(text, *DISCORD[:1])
    assert len(parts) == DEFAULT_MAX_PARTS
    assert parts[-1].startswith(f"({DEFAULT_MAX_PARTS}/{DEFAULT_MAX_PARTS})")
    assert "too long for chat" in parts[-1] and "continue from the last words" in parts[-1]
    shown = join_parts(parts)
    assert text.startswith(shown) and f"first {len(shown):,} of {len(text):,} characters" in parts[-1]


def test_a_truncated_reply_closes_the_fence_it_was_cut_in() -> None:
    text = "```\n" + "\n".join(f"row {i}" for i in range(5000)) + "\n```"
    parts = check(text, *TELEGRAM, max_parts=3)
    assert len(parts) == 3
    assert "\n```\n\n[The reply was too long" in parts[-1]


def test_max_parts_one_sends_one_cut_message() -> None:
    [part] = check("word " * 2000, *DISCORD, max_parts=1)
    assert part.endswith("to get the rest.]")


# --- linear work -------------------------------------------------------------------------------


def adversarial_corpus(size: int, seed: int = 7) -> str:
    """A fixed mix of the shapes above, ``size`` characters long."""
    rng = random.Random(seed)
    atoms = ["```\n", "~~~\n", "`" * 300, "x ", "🙂", "word. ", "\n\n", "```python\n", " " * 200]
    atoms += ["\u200d" * 5, "שלום ", "`\n" * 20, "e\u0301" * 30]
    out: list[str] = []
    total = 0
    while total < size:
        atom = rng.choice(atoms)
        out.append(atom)
        total += len(atom)
    return "".join(out)[:size]


def line_events(run: Callable[[], object]) -> int:
    """Lines of the splitter's own code executed by ``run``: its operation count."""
    files = {gateway.splitter.__file__, gateway.fences.__file__}
    count = 0

    def local(frame: object, event: str, arg: object) -> object:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def trace(frame: object, event: str, arg: object) -> object:
        return local if frame.f_code.co_filename in files else None  # type: ignore[attr-defined]

    sys.settrace(trace)
    try:
        run()
    finally:
        sys.settrace(None)
    return count


@pytest.mark.parametrize(
    "make",
    [
        lambda n: adversarial_corpus(1000) * (n // 1000),
        lambda n: "`" * n,
        lambda n: ("`" * 97 + "\n") * (n // 98),
    ],
    ids=["mixed", "backticks", "fence-lines"],
)
def test_work_grows_linearly_with_the_text(make: Callable[[int], str]) -> None:
    small, large = make(3000), make(24_000)

    def ops(text: str) -> int:
        return line_events(lambda: split_message(text, 200, measure=utf16_len, max_parts=None))

    ratio = ops(large) / ops(small)
    assert ratio < 11, f"8x the text cost {ratio:.1f}x the work (quadratic would be ~64x)"


def test_a_bounded_split_of_a_huge_text_does_work_for_the_parts_it_sends() -> None:
    def ops(text: str) -> int:
        return line_events(lambda: split_message(text, *TELEGRAM[:1], measure=utf16_len))

    ratio = ops(adversarial_corpus(400_000)) / ops(adversarial_corpus(50_000))
    assert ratio < 3, f"the cut reply cost {ratio:.1f}x more for 8x the text"
