"""Phase 2 of compression: which messages stay verbatim (a head and a tail) and which middle
range is summarized. Boundaries only ever move outward, so a tool_use and its tool_result
are never separated and the tail never starts with a tool_result.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from agent.types import ChatMessage


@dataclass(frozen=True, slots=True)
class Boundaries:
    """``messages[:head_end]`` head, ``[head_end:tail_start]`` middle, ``[tail_start:]`` tail.

    ``protect_start`` is where the token-budget tail began before it was widened to reach the
    latest user message and whole tool rounds; phase 1 prunes nothing at or after it.
    """

    head_end: int
    tail_start: int
    protect_start: int

    @property
    def middle(self) -> range:
        return range(self.head_end, self.tail_start)


def is_human(m: ChatMessage) -> bool:
    """A message a person wrote (user role, words, no tool results)."""
    return (
        m.role == "user"
        and m.kind == "message"
        and any(b.get("type") == "text" and b.get("text") for b in m.content)
        and not any(b.get("type") == "tool_result" for b in m.content)
    )


def humans_newest_first(messages: Sequence[ChatMessage]) -> Iterator[ChatMessage]:
    """The messages people wrote, from the newest back (lazily: the latest few cost little)."""
    return (m for m in reversed(messages) if is_human(m))


def has_tool_result(m: ChatMessage) -> bool:
    return any(b.get("type") == "tool_result" for b in m.content)


def has_tool_use(m: ChatMessage) -> bool:
    return any(b.get("type") == "tool_use" for b in m.content)


def head_end(messages: Sequence[ChatMessage], *, protect: bool) -> int:
    """The first exchange (first user message and the plain assistant reply), or nothing once a
    summary exists (the first compaction's head is then folded into the next summary)."""
    if not protect or not messages or any(m.kind == "summary" for m in messages):
        return 0
    if messages[0].role != "user" or has_tool_result(messages[0]):
        return 0
    if len(messages) > 1 and messages[1].role == "assistant" and not has_tool_use(messages[1]):
        return 2
    return 1


def choose_boundaries(
    messages: Sequence[ChatMessage],
    tokens: Sequence[int],
    *,
    protect_head: bool,
    tail_budget: int,
    tail_floor: int,
    tail_cap: int,
    min_tail_users: int,
) -> Boundaries:
    """Head, middle and tail for ``messages`` whose estimated sizes are ``tokens``.

    The tail takes messages from the end while they fit ``tail_budget`` tokens, and at least
    the last ``tail_floor`` messages as long as they fit ``tail_cap``; then it widens to hold
    ``min_tail_users`` human messages (so always the latest) and never to start on a tool_result,
    and it starts after the latest summary (as long as the latest human message is after it).
    Messages not yet persisted (no id) cannot be archived, so they are always in the tail.
    """
    n = len(messages)
    head = head_end(messages, protect=protect_head)
    start = n
    used = 0
    for index in range(n - 1, head - 1, -1):
        size = tokens[index]
        in_budget = used + size <= tail_budget
        in_floor = n - index <= tail_floor and used + size <= tail_cap
        if not (in_budget or in_floor):
            break
        used += size
        start = index
    protect_start = start

    humans = [i for i in range(n) if is_human(messages[i])]
    if humans:
        start = min(start, humans[-min(min_tail_users, len(humans))])
    # An earlier summary never stays in the tail: it is folded into the new one (else two
    # summaries would be active, and the next compaction would see only the later one).
    summaries = [i for i in range(n) if messages[i].kind == "summary"]
    if summaries and start <= summaries[-1] and (not humans or humans[-1] > summaries[-1]):
        start = summaries[-1] + 1
    unpersisted = next((i for i in range(n) if messages[i].id is None), n)
    start = min(start, unpersisted)
    while start > head and start < n and has_tool_result(messages[start]):
        start -= 1
    start = max(start, head)
    return Boundaries(head_end=head, tail_start=start, protect_start=max(protect_start, start))


def archived_id_runs(middle: Sequence[ChatMessage]) -> list[tuple[int, int]]:
    """The ids a summary archives, as (first, last) runs that hold no id archived by another compaction.

    Not min..max of the middle: an earlier summary in it has a new id, and where it sits (in the
    order of the view) lie the rows that earlier compaction archived; the head kept by the first
    compaction comes before them and is archived by the next one. So a run ends at a summary, and
    where ids stop rising (a pruned copy is a new row where its original was).
    """
    runs: list[tuple[int, int]] = []
    first = last = None
    for m in middle:
        if m.id is None:
            continue
        if m.kind == "summary" or (last is not None and m.id <= last):
            if first is not None and last is not None:
                runs.append((first, last))
            first = last = None
            if m.kind == "summary":
                continue
        first = m.id if first is None else first
        last = m.id
    if first is not None and last is not None:
        runs.append((first, last))
    return runs
