"""Text facts the splitter relies on: code fences (CommonMark-like), UTF-16 length, grapheme joins.

Shared by :mod:`gateway.splitter` and the Telegram formatter, so that "is this line a fence"
has one answer everywhere.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_FENCE_LEAD = re.compile(r" {0,3}(`{3,}|~{3,})")
_ZWJ = "\u200d"
_GRAPHEME_LOOKBACK = 64
"""How far back a regional-indicator run is counted: a longer run is absurd input, not a flag."""


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, as Telegram counts message length and entity offsets."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@dataclass(frozen=True, slots=True)
class Fence:
    """An open code fence: its opener line (verbatim) and the run of fence characters."""

    line: str
    run: str

    @property
    def closer(self) -> str:
        return "\n" + self.run


def next_fence_state(state: Fence | None, line: str) -> Fence | None:
    """The fence state after ``line`` (CommonMark-like: up to 3 spaces of indent)."""
    if state is None:
        m = _FENCE_OPEN.match(line)
        if m is None or (m.group(2)[0] == "`" and "`" in m.group(3)):
            return None
        return Fence(line=line, run=m.group(2))
    stripped = line.lstrip(" ")
    core = stripped.rstrip(" \t")
    is_closer = (
        len(line) - len(stripped) <= 3 and len(core) >= len(state.run) and core == state.run[0] * len(core)
    )
    return None if is_closer else state


def parse_lines(text: str, state: Fence | None = None, *, last_line: bool = False) -> Fence | None:
    """The fence state after the lines of ``text`` (its unterminated last line only with ``last_line``)."""
    lines = text.split("\n")
    if not last_line:
        lines.pop()
    for line in lines:
        state = next_fence_state(state, line.rstrip("\r"))
    return state


def fence_state(text: str) -> Fence | None:
    """The fence still open at the end of ``text`` (an unterminated last line does not count)."""
    return parse_lines(text)


def fence_lead(text: str, start: int, stop: int) -> tuple[int, int]:
    """For the line starting at ``start`` (read up to ``stop``): where its fence-character run
    starts and how long it is, when the line starts with up to 3 spaces and 3+ of ` or ~.

    ``(start, 0)`` when the line cannot be a fence line.
    """
    m = _FENCE_LEAD.match(text, start, stop)
    return (m.start(1), len(m.group(1))) if m is not None else (start, 0)


def joins_previous(text: str, pos: int) -> bool:
    """True when cutting at ``pos`` would split a grapheme cluster (cheap approximation)."""
    ch, prev = text[pos], text[pos - 1]
    if ch == _ZWJ or prev == _ZWJ or (prev == "\r" and ch == "\n"):
        return True
    if "\ud800" <= prev <= "\udbff" and "\udc00" <= ch <= "\udfff":  # a pair that was never joined
        return True
    code = ord(ch)
    if 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:  # variation selectors
        return True
    if 0x1F3FB <= code <= 0x1F3FF or 0xE0020 <= code <= 0xE007F:  # skin tones, tag characters
        return True
    if unicodedata.category(ch) in ("Mn", "Me", "Mc"):
        return True
    if _is_regional(ch) and _is_regional(prev):
        run = 0
        i = pos - 1
        while i >= 0 and run < _GRAPHEME_LOOKBACK and _is_regional(text[i]):
            run += 1
            i -= 1
        return run % 2 == 1
    return False


def _is_regional(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF
