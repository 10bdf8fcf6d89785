"""What one session's previous request was built from, so the next one reuses its unchanged prefix.

A conversation's requests share their beginning: a turn adds a message or two at the end
and the rest is the very same messages. Turning a thousand messages into their wire form,
summing their token estimates and checking them against the API's rules costs milliseconds
that grow with the view; done for the new messages only, it costs what they cost.

The prefix is recognised by identity: :class:`~agent.types.ChatMessage` is immutable and the
view cache hands out the same objects from turn to turn, so an unchanged message is the same
object, and a compaction, an edit or a repair (new objects) falls back to building afresh.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from agent.prompt_caching import without_cache_control
from agent.tokens import estimate_message_tokens
from agent.tools.citable import plain_search_results
from agent.transcript import WireCheck
from agent.types import ChatMessage

CAPACITY = 128


class RequestMemo:
    """The wire form and running token sums of one session's last view, and its API check."""

    def __init__(self) -> None:
        self._view: list[ChatMessage] = []
        self._wires: list[dict[str, Any]] = []
        self._sums: list[int] = []
        self._plain = False
        self._marked = 0
        self.check = WireCheck()

    @property
    def unmarked(self) -> bool:
        """No wire message of the last view carries a ``cache_control`` marker of its own."""
        return not self._marked

    def wires(self, view: Sequence[ChatMessage], *, plain: bool) -> tuple[list[dict[str, Any]], list[int]]:
        """The wire messages of ``view`` (search results as text when ``plain``) and the rough
        tokens up to and including each. Both lists are the memo's own: read them, never
        change them."""
        if plain != self._plain:
            self._view, self._wires, self._sums, self._plain, self._marked = [], [], [], plain, 0
        same = common_prefix(view, self._view)
        wires, sums = self._wires[:same], self._sums[:same]
        self._marked -= sum(1 for w in self._wires[same:] if _marked(w))
        total = sums[-1] if sums else 0
        for message in view[same:]:
            wire = message.to_wire()
            wire = plain_search_results([wire])[0] if plain else wire
            self._marked += _marked(wire)
            wires.append(wire)
            total += estimate_message_tokens(message)
            sums.append(total)
        self._view, self._wires, self._sums = list(view), wires, sums
        return wires, sums


def common_prefix(a: Sequence[object], b: Sequence[object]) -> int:
    """How many leading items of ``a`` and ``b`` are the very same objects (compared in C)."""
    same = list(map(operator.is_, a, b))
    return same.index(False) if False in same else len(same)


def _marked(wire: dict[str, Any]) -> bool:
    return without_cache_control(wire) is not wire


class RequestMemos:
    """Session id -> :class:`RequestMemo`, the ``capacity`` most recently used."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._capacity = capacity
        self._memos: OrderedDict[str, RequestMemo] = OrderedDict()

    def get(self, session_id: str) -> RequestMemo:
        memo = self._memos.get(session_id)
        if memo is None:
            memo = self._memos[session_id] = RequestMemo()
            while len(self._memos) > self._capacity:
                self._memos.popitem(last=False)
        else:
            self._memos.move_to_end(session_id)
        return memo
