"""Split a long reply into messages a platform accepts, keeping code fences intact.

Every part measures at most ``limit`` with the platform's own ``measure`` (Telegram counts
UTF-16 code units: :func:`utf16_len`). Boundaries are chosen in this order of preference:
paragraph, line, sentence, word, and a hard cut last (never between a character and the
joiner, variation selector or modifier that follows it). A part that ends inside a ```
fence gets a closing fence appended and the next part reopens it with the same opener
line, so every part renders on its own. Parts are marked ``(1/3)``, the marker counted
in the limit. :func:`join_parts` is the exact inverse.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Measure = Callable[[str], int]

MIN_LIMIT = 16
"""Below this a marker plus a reopened fence cannot leave room for text."""

_FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_MARKER = re.compile(r"^\((\d+)/(\d+)\)[ \n]")
_SENTENCE_END = re.compile(r"[.!?…](?:[\"')\]»”’]*)\s+|[。！？]")
_TRAILING_FENCE = re.compile(r"\n(`{3,}|~{3,})\Z")
_FULL_ENOUGH = 0.5
"""A paragraph, line or sentence boundary is used only when it fills at least half the part."""


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, as Telegram counts message length and entity offsets."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


@dataclass(frozen=True, slots=True)
class Fence:
    """An open code fence: its opener line (verbatim) and the run of fence characters."""

    line: str
    run: str

    @property
    def closer(self) -> str:
        return "\n" + self.run


class FenceMap:
    """Where fences open and close in a text (complete lines only) and which lines are fences."""

    def __init__(self, text: str) -> None:
        self._line_ends: list[int] = []  # position just after each complete line's "\n"
        self._state_after: list[Fence | None] = []
        self._fence_lines: list[tuple[int, int]] = []  # (line start, index of its "\n")
        self._opener_ends: set[int] = set()
        state: Fence | None = None
        start = 0
        while True:
            newline = text.find("\n", start)
            if newline < 0:
                break
            line = text[start:newline].rstrip("\r")
            new_state = next_fence_state(state, line)
            if new_state is not state:
                self._fence_lines.append((start, newline))
                if new_state is not None:
                    self._opener_ends.add(newline + 1)
            state = new_state
            self._line_ends.append(newline + 1)
            self._state_after.append(state)
            start = newline + 1
        self._fence_starts = [s for s, _ in self._fence_lines]

    def state_at(self, pos: int) -> Fence | None:
        """The fence open at ``pos`` (only lines complete before ``pos`` count)."""
        i = bisect.bisect_right(self._line_ends, pos) - 1
        return self._state_after[i] if i >= 0 else None

    def inside_fence_line(self, pos: int) -> bool:
        """True when ``pos`` falls after the start of a fence line and before its newline."""
        i = bisect.bisect_left(self._fence_starts, pos) - 1
        if i < 0:
            return False
        start, newline = self._fence_lines[i]
        return start < pos <= newline

    def right_after_opener(self, pos: int) -> bool:
        return pos in self._opener_ends


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


def fence_state(text: str) -> Fence | None:
    """The fence still open at the end of ``text`` (an unterminated last line does not count)."""
    return FenceMap(text).state_at(len(text))


def split_message(text: str, limit: int, *, measure: Measure = len, mark_parts: bool = True) -> list[str]:
    """Split ``text`` into parts each at most ``limit`` by ``measure``.

    Returns ``[]`` for an empty text and ``[text]`` when it already fits (no marker then).
    Raises ValueError when ``limit`` is below :data:`MIN_LIMIT`.
    """
    if limit < MIN_LIMIT:
        raise ValueError(f"limit {limit} is too small to split into (minimum {MIN_LIMIT})")
    if not text:
        return []
    if measure(text) <= limit:
        return [text]
    fences = FenceMap(text)
    digits = 1
    while True:
        reserve = measure(f"({'9' * digits}/{'9' * digits})\n") if mark_parts else 0
        bodies = _split_bodies(text, limit - reserve, measure, fences)
        if not mark_parts or len(bodies) < 10**digits:
            break
        digits += 1
    if not mark_parts:
        return bodies
    n = len(bodies)
    return [f"({i}/{n}){_marker_sep(body)}{body}" for i, body in enumerate(bodies, 1)]


def _marker_sep(body: str) -> str:
    # A fence opener must start its line to stay a fence.
    return "\n" if body.lstrip(" ").startswith(("```", "~~~")) else " "


def _split_bodies(text: str, budget: int, measure: Measure, fences: FenceMap) -> list[str]:
    bodies: list[str] = []
    start = 0
    while start < len(text):
        opener = fences.state_at(start)
        head = opener.line + "\n" if opener is not None else ""
        hi = len(text)
        while True:
            end = _longest_fit(text, start, hi, head, budget, measure)
            if end <= start:
                raise ValueError(f"limit too small to make progress at offset {start}")
            if end == len(text):
                bodies.append(head + text[start:])
                return bodies
            cut = _choose_cut(text, start, end, fences)
            state = fences.state_at(cut)
            tail = state.closer if state is not None else ""
            body = head + text[start:cut] + tail
            if measure(body) <= budget:
                bodies.append(body)
                start = cut
                break
            hi = cut - 1
    return bodies


def _longest_fit(text: str, start: int, hi: int, head: str, budget: int, measure: Measure) -> int:
    """The largest end in [start, hi] with ``measure(head + text[start:end]) <= budget``."""
    lo = start
    if measure(head + text[start:hi]) <= budget:
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if measure(head + text[start:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _choose_cut(text: str, start: int, end: int, fences: FenceMap) -> int:
    """The best split position in (start, end]: paragraph, line, sentence, word, then hard."""
    min_full = start + max(1, int((end - start) * _FULL_ENOUGH))

    def good(pos: int) -> bool:
        return not (
            fences.inside_fence_line(pos) or fences.right_after_opener(pos) or _starts_false_fence(text, pos)
        )

    for candidates in (
        _rfind_all(text, "\n\n", start, end),
        _rfind_all(text, "\n", start, end),
        _sentence_ends(text, start, end),
    ):
        for pos in candidates:
            if pos < min_full:
                break
            if good(pos):
                return pos
    for pos in _word_ends(text, start, end):
        if good(pos):
            return pos
    return _hard_cut(text, start, end, fences)


def _rfind_all(text: str, needle: str, start: int, end: int) -> list[int]:
    """Positions just after each occurrence of ``needle`` inside text[start:end], last first."""
    found: list[int] = []
    stop = end
    while (i := text.rfind(needle, start, stop)) >= 0:
        found.append(i + len(needle))
        stop = i + len(needle) - 1
    return found


def _sentence_ends(text: str, start: int, end: int) -> list[int]:
    return [m.end() for m in _SENTENCE_END.finditer(text, start, end) if m.end() > start][::-1]


def _word_ends(text: str, start: int, end: int) -> list[int]:
    return [i + 1 for i in range(end - 1, start - 1, -1) if text[i] in " \t" and i + 1 > start]


def _hard_cut(text: str, start: int, end: int, fences: FenceMap) -> int:
    pos = end
    while pos > start + 1 and (_joins_previous(text, pos) or _starts_false_fence(text, pos)):
        pos -= 1
    if fences.inside_fence_line(pos):
        line_start = text.rfind("\n", start, pos) + 1
        if line_start > start:
            pos = line_start
    return pos if pos > start else end


_ZWJ = "\u200d"


def _starts_false_fence(text: str, pos: int) -> bool:
    """True when cutting mid-line at ``pos`` would start the next part with what reads as a fence."""
    return text[pos - 1] != "\n" and text[pos : pos + 8].lstrip(" ").startswith(("```", "~~~"))


def _joins_previous(text: str, pos: int) -> bool:
    """True when cutting at ``pos`` would split a grapheme cluster (cheap approximation)."""
    ch, prev = text[pos], text[pos - 1]
    if ch == _ZWJ or prev == _ZWJ or (prev == "\r" and ch == "\n"):
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
        while i >= 0 and _is_regional(text[i]):
            run += 1
            i -= 1
        return run % 2 == 1
    return False


def _is_regional(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


def join_parts(parts: Sequence[str], *, marked: bool = True) -> str:
    """Rebuild the text :func:`split_message` split (markers, added closers and reopeners removed)."""
    if len(parts) <= 1:
        return "".join(parts)
    out = ""
    n = len(parts)
    for i, part in enumerate(parts):
        body = part
        if marked:
            m = _MARKER.match(body)
            if m is None or (int(m.group(1)), int(m.group(2))) != (i + 1, n):
                raise ValueError(f"part {i + 1} has no ({i + 1}/{n}) marker")
            body = body[m.end() :]
        opener = fence_state(out)
        if opener is not None:
            if not body.startswith(opener.line + "\n"):
                raise ValueError(f"part {i + 1} does not reopen the fence {opener.line!r}")
            body = body[len(opener.line) + 1 :]
        if i < n - 1:
            m = _TRAILING_FENCE.search(body)
            if m is not None:
                state = fence_state(out + body[: m.start()])
                if state is not None and state.run == m.group(1):
                    body = body[: m.start()]
        out += body
    return out
