"""Split a long reply into messages a platform accepts, keeping code fences intact.

Guarantees, for any text (the fuzz suite in ``tests/gateway/test_splitter_adversarial.py``
holds them): every part measures at most ``limit`` with the platform's own ``measure``
(Telegram counts UTF-16 code units: :func:`utf16_len`); there are at most ``max_parts``
parts (default :data:`DEFAULT_MAX_PARTS`); the work is linear in the text (one pass to find
fences, then each part looks only at its own window); it never raises.

Boundaries are chosen in this order of preference: paragraph, line, sentence, word, and a
hard cut last (not between a character and the joiner, variation selector or modifier that
follows it). A part that ends inside a ``` fence gets a closing fence, and the next part
reopens it with the same opener line, so every part renders on its own. Parts are marked
``(1/3)``, the marker counted in the limit. :func:`join_parts` is the exact inverse.

A reply that would need more than ``max_parts`` parts is **truncated**: the last part ends
with a note saying how much was shown and how to get the rest (ask to continue from the
last words; the whole reply stays stored in the conversation). A chat flooded with dozens
of messages helps nobody, and a text file is not something every platform shows inline.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate

from gateway.fences import (
    Fence,
    fence_lead,
    fence_state,
    joins_previous,
    next_fence_state,
    parse_lines,
    utf16_len,
)

__all__ = [
    "DEFAULT_MAX_PARTS",
    "MIN_LIMIT",
    "Fence",
    "fence_state",
    "join_parts",
    "next_fence_state",
    "split_message",
    "utf16_len",
]

Measure = Callable[[str], int]

MIN_LIMIT = 32
"""Below this a marker, a reopened fence and its closer cannot leave room for text."""
DEFAULT_MAX_PARTS = 10
"""A reply longer than this many messages is cut, with a note (``delivery.max_reply_parts``)."""

_MARKER = re.compile(r"^\((\d+)/(\d+)\)[ \n]")
_SENTENCE_END = re.compile(r"[.!?…](?:[\"')\]»”’]*)\s+|[。！？]")
_TRAILING_RUN = re.compile(r"\n(`{3,}|~{3,})\Z")
_CUT_NOTE = (
    "\n\n[The reply was too long for chat; this is the first {shown:,} of {total:,} characters. "
    "Ask me to continue from the last words above to get the rest.]"
)
_SHORT_NOTE = "\n[cut]"
_NOTE = re.compile(
    r"(?:\n\n\[The reply was too long for chat; this is the first [\d,]+ of [\d,]+ characters\. "
    r"Ask me to continue from the last words above to get the rest\.\]|\n\[cut\])\Z"
)
_FULL_ENOUGH = 0.5
"""A paragraph, line or sentence boundary is used only when it fills at least half the part."""
_HARD_CUT_TRIES = 32
"""How far a hard cut backs off to avoid splitting a grapheme; longer clusters are absurd input."""


def split_message(
    text: str,
    limit: int,
    *,
    measure: Measure = len,
    mark_parts: bool = True,
    max_parts: int | None = DEFAULT_MAX_PARTS,
) -> list[str]:
    """Split ``text`` into parts each at most ``limit`` by ``measure``.

    Returns ``[]`` for an empty text and ``[text]`` when it already fits (no marker then).
    ``measure`` must add up over code points (``len`` and :func:`utf16_len` do). With
    ``max_parts=None`` nothing is cut. Raises ValueError only for a ``limit`` below
    :data:`MIN_LIMIT` or a ``max_parts`` below 1, never because of the text.
    """
    if limit < MIN_LIMIT:
        raise ValueError(f"limit {limit} is too small to split into (minimum {MIN_LIMIT})")
    if max_parts is not None and max_parts < 1:
        raise ValueError("max_parts must be at least 1")
    if not text:
        return []
    if len(text) <= limit and measure(text) <= limit:
        return [text]
    # Room for the widest marker; a generous guess at the count, so one pass is the rule.
    guess = max_parts if max_parts is not None else 4 * (len(text) // limit + 1)
    digits = len(str(guess))
    while True:
        reserve = measure(f"({'9' * digits}/{'9' * digits})\n") if mark_parts else 0
        plan = _Planner(text, limit - reserve, measure, max_parts).plan()
        if not mark_parts or len(plan) < 10**digits:
            break
        digits += 1
    bodies = [p.head + text[p.start : p.end] + p.tail + p.note for p in plan]
    if not mark_parts or len(bodies) == 1:
        return bodies
    n = len(bodies)
    return [f"({i}/{n}){_marker_sep(body)}{body}" for i, body in enumerate(bodies, 1)]


def _marker_sep(body: str) -> str:
    # A fence opener must start its line to stay a fence.
    return "\n" if body.lstrip(" ").startswith(("```", "~~~")) else " "


@dataclass(frozen=True, slots=True)
class _Part:
    start: int
    end: int
    head: str
    tail: str
    note: str = ""


@dataclass(slots=True)
class _Window:
    """The lines of one part's window, parsed as the part itself will read: after its head."""

    starts: list[int]
    states: list[Fence | None]
    guards: list[int]  # a mid-line cut in (start, guard] of that line is refused
    end: int
    widest_run: int
    first_run: tuple[int, int]

    def line_of(self, pos: int) -> int:
        return bisect.bisect_right(self.starts, pos) - 1


class _Planner:
    """One split of ``text`` into part spans; see :func:`split_message`."""

    def __init__(self, text: str, budget: int, measure: Measure, max_parts: int | None) -> None:
        self.text = text
        self.n = len(text)
        self.budget = budget
        self.measure = measure
        self.max_parts = max_parts
        self.cap = max(3, budget // 4)  # the widest fence run a part reopens or closes
        # Every code point measures at least 1, so max_parts parts never reach past this.
        self.region = self.n if max_parts is None else min(self.n, (max_parts + 1) * budget)
        self._prefix = _prefix_units(text[: self.region], measure)
        self._line_pos = 0  # start of the first line not yet parsed for fences
        self._scanned = 0  # no newline in [_line_pos, _scanned)
        self._state: Fence | None = None

    # measuring ---------------------------------------------------------------------------
    def units(self, a: int, b: int) -> int:
        return b - a if self._prefix is None else self._prefix[b] - self._prefix[a]

    def max_end(self, a: int, room: int) -> int:
        """The largest end ``b`` (within the region) with ``units(a, b) <= room``."""
        hi = min(self.region, a + max(0, room))
        if self._prefix is None:
            return hi
        return bisect.bisect_right(self._prefix, self._prefix[a] + room, a, hi + 1) - 1

    def rest_fits(self, a: int, room: int) -> bool:
        return self.n - a <= room and self.measure(self.text[a:]) <= room

    # the text's own fences ---------------------------------------------------------------
    def state_at(self, pos: int) -> Fence | None:
        """The fence open at ``pos`` in the whole text (complete lines before ``pos`` only)."""
        text = self.text
        while True:
            newline = text.find("\n", max(self._line_pos, self._scanned), pos)
            if newline < 0:
                self._scanned = max(self._scanned, pos)
                return self._state
            self._state = next_fence_state(self._state, text[self._line_pos : newline].rstrip("\r"))
            self._line_pos = self._scanned = newline + 1

    def head_for(self, fence: Fence | None) -> str:
        """The line that reopens ``fence``: its opener, or its run alone when the opener is too long."""
        if fence is None:
            return ""
        for line in (fence.line, fence.run):
            if len(line) <= self.cap and self.measure(line) <= self.cap:
                return line + "\n"
        return fence.run[0] * self.cap + "\n"

    # planning ----------------------------------------------------------------------------
    def plan(self) -> list[_Part]:
        parts: list[_Part] = []
        a = 0
        while a < self.n:
            head = self.head_for(self.state_at(a))
            room = self.budget - self.measure(head)
            if self.rest_fits(a, room):
                parts.append(_Part(a, self.n, head, ""))
                break
            last = self.max_parts is not None and len(parts) == self.max_parts - 1
            note = self.note(self.n) if last else ""
            b, tail = self.cut(a, head, room - self.measure(note))
            spare = room - self.units(a, b)
            if b < self.n and not self.text[a:b].strip() and spare >= self.budget // 2:
                # Only whitespace before a line that must start a part (a long fence run): it
                # leads that part instead, so that no message shows nothing but its marker.
                if self.rest_fits(b, spare):
                    parts.append(_Part(a, self.n, head, ""))
                    break
                b, tail = self.cut(b, head, spare - self.measure(note))
            if last:
                parts.append(_Part(a, b, head, tail, self.note(b)))
                break
            parts.append(_Part(a, b, head, tail))
            a = b
        return parts

    def note(self, shown: int) -> str:
        full = _CUT_NOTE.format(shown=shown, total=self.n)
        return (
            full
            if self.measure(_CUT_NOTE.format(shown=self.n, total=self.n)) <= self.budget // 3
            else _SHORT_NOTE
        )

    def cut(self, a: int, head: str, room: int) -> tuple[int, str]:
        """Where the part starting at ``a`` ends, and the closer it needs; within ``room`` units."""
        head_state = parse_lines(head) if head else None
        window = self.window(a, head_state, self.max_end(a, room))
        if window.first_run[1] > self.cap:
            found = self.cut_in_long_run(a, head_state, room, window)
        else:
            reserve = 1 + window.widest_run if window.widest_run else 0
            end = min(window.end, self.max_end(a, room - reserve))
            b = self.choose(a, max(end, a + 1), window)
            found = self.fitting(a, b, window, room)
        if found is not None:
            return found
        return max(a + 1, self.max_end(a, room)), ""  # unreachable at MIN_LIMIT or above; stays in limit

    def window(self, a: int, head_state: Fence | None, end: int) -> _Window:
        """Parse the lines in [a, end]; the window stops before a line whose fence run is too long."""
        text = self.text
        starts, states, guards = [a], [head_state], []
        widest = len(head_state.run) if head_state is not None else 0
        first_run = (a, 0)
        state = head_state
        start = a
        while True:
            newline = text.find("\n", start, end)
            line_stop = newline if newline >= 0 else end
            run_at, run = fence_lead(text, start, min(self.n, start + self.cap + 5))
            if start == a:
                first_run = (run_at, run)
            elif run > self.cap:
                end = start  # never inside this line: it starts the next part
                guards.append(start)
                break
            widest = max(widest, min(run, self.cap))
            guards.append(self.guard(start, run_at, run, line_stop, newline >= 0) if start > a else start)
            if newline < 0:
                break
            state = next_fence_state(state, text[start:newline].rstrip("\r"))
            start = newline + 1
            starts.append(start)
            states.append(state)
        if len(guards) < len(starts):
            guards.append(starts[-1])
        return _Window(starts, states, guards, end, widest, first_run)

    def guard(self, start: int, run_at: int, run: int, line_stop: int, complete: bool) -> int:
        """How far mid-line cuts are refused in a line that looks like a fence: cutting there
        would end a part on half a fence line (or on a closer the joiner could not tell apart)."""
        if run == 0:
            return start
        if complete and line_stop - start <= self.cap:
            return line_stop
        i = run_at + run
        while i < line_stop and self.text[i] in " \t\r":
            i += 1
        return i

    def choose(self, a: int, end: int, window: _Window) -> int:
        """The best cut in (a, end]: paragraph, line, sentence, word, then hard."""
        text = self.text
        min_full = a + max(1, int((end - a) * _FULL_ENOUGH))

        def boundary_ok(pos: int) -> bool:
            i = window.line_of(pos)
            opened = i > 0 and window.states[i] is not None and window.states[i] is not window.states[i - 1]
            return window.starts[i] == pos and not opened

        for needle in ("\n\n", "\n"):
            stop = end
            while (i := text.rfind(needle, a, stop)) >= 0 and i + len(needle) >= min_full:
                if i + len(needle) <= end and boundary_ok(i + len(needle)):
                    return i + len(needle)
                stop = i + len(needle) - 1
        ends = [m.end() for m in _SENTENCE_END.finditer(text, a, end)]
        for pos in reversed(ends):
            if pos < min_full:
                break
            if self.may_cut(pos, a, window):
                return pos
        for i in range(end - 1, a - 1, -1):
            if text[i] in " \t" and self.may_cut(i + 1, a, window):
                return i + 1
        return self.hard_cut(a, end, window)

    def may_cut(self, pos: int, a: int, window: _Window) -> bool:
        i = window.line_of(pos)
        if window.starts[i] == pos:
            return True
        if window.starts[i] > a and pos <= window.guards[i]:
            return False
        return pos >= self.n or not joins_previous(self.text, pos)

    def hard_cut(self, a: int, end: int, window: _Window) -> int:
        text = self.text
        pos = end
        for _ in range(_HARD_CUT_TRIES):
            if pos <= a + 1:
                break
            i = window.line_of(pos)
            if window.starts[i] == pos:
                return pos
            if window.starts[i] > a and pos <= window.guards[i]:
                return window.starts[i]
            false_fence = text[pos - 1] != "\n" and text.startswith(("```", "~~~"), pos)
            if pos < self.n and not joins_previous(text, pos) and not false_fence:
                return pos
            pos -= 1
        i = window.line_of(end)
        if window.starts[i] > a and end <= window.guards[i] and window.starts[i] != end:
            return window.starts[i]
        return end

    def fitting(self, a: int, b: int, window: _Window, room: int) -> tuple[int, str] | None:
        """``(b, closer)`` when the part [a, b) with its closer fits in ``room``."""
        i = window.line_of(b)
        state = window.states[i]
        if window.starts[i] != b:
            state = next_fence_state(state, self.text[window.starts[i] : b].rstrip("\r"))
        tail = "" if state is None else "\n" + state.run
        return (b, tail) if self.units(a, b) + self.measure(tail) <= room else None

    def cut_in_long_run(
        self, a: int, head_state: Fence | None, room: int, window: _Window
    ) -> tuple[int, str] | None:
        """The part starts with a fence run wider than any closer could be: take what fits.

        Half of it when it opens a fence here (the closer repeats it), else as much as fits.
        """
        run_at, run = fence_lead(self.text, a, min(self.n, a + room + 4))
        line_end = window.starts[1] if len(window.starts) > 1 else window.end
        head_run = len(head_state.run) if head_state is not None else 0
        half = run_at + max(0, min(run, (room - (run_at - a) - 1) // 2))
        options = {line_end, half, self.max_end(a, room - 1 - head_run), a + 1}
        for b in sorted(options, reverse=True):
            if a < b <= line_end:
                state = parse_lines(self.text[a:b], head_state, last_line=True)
                tail = "" if state is None else "\n" + state.run
                if self.units(a, b) + self.measure(tail) <= room:
                    return b, tail
        return None


def _prefix_units(text: str, measure: Measure) -> list[int] | None:
    """Cumulative units per code point (None when every code point is one unit)."""
    if measure is len:
        return None
    if measure is utf16_len:
        return [0, *accumulate(2 if ch > "\uffff" else 1 for ch in text)]
    return [0, *accumulate(measure(ch) for ch in text)]


def join_parts(parts: Sequence[str], *, marked: bool = True) -> str:
    """Rebuild the text :func:`split_message` split (markers, added closers and reopeners removed).

    Of a truncated reply it rebuilds the part that was sent.
    """
    if len(parts) == 1 and (not parts[0] or _NOTE.search(parts[0]) is None):
        return parts[0]
    out: list[str] = []
    n = len(parts)
    for i, part in enumerate(parts):
        body = part
        if marked and n > 1:
            m = _MARKER.match(body)
            if m is None or (int(m.group(1)), int(m.group(2))) != (i + 1, n):
                raise ValueError(f"part {i + 1} has no ({i + 1}/{n}) marker")
            body = body[m.end() :]
        last = i == n - 1
        if last and (note := _NOTE.search(body)) is not None:
            body, last = body[: note.start()], False
        head = ""
        if fence_state("".join(out)) is not None:
            line, newline, rest = body.partition("\n")
            if not newline:
                raise ValueError(f"part {i + 1} does not reopen the open fence")
            head, body = line + "\n", rest
        if not last and (m := _TRAILING_RUN.search(body)) is not None:
            state = parse_lines(head + body[: m.start()], last_line=True)
            if state is not None and state.run == m.group(1):
                body = body[: m.start()]
        out.append(body)
    return "".join(out)
