"""Rules a transcript must satisfy for the Messages API, and the repair that restores them.

The same checks run in three places: before each real call (a last line of defence),
after every compaction, and in the fake Anthropic server used by the tests, so a
transcript the tests accept is one the real API accepts.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import Any

from agent.types import ChatMessage, ContentBlock

MAX_CACHE_BREAKPOINTS = 4
# Blocks of the API's own server tools (the tool search tool) that an answer may hold.
SERVER_BLOCKS = frozenset({"server_tool_use", "tool_search_tool_result"})


def count_cache_breakpoints(
    messages: Sequence[dict[str, Any]],
    system: Iterable[dict[str, Any]] | str | None = None,
    tools: Iterable[dict[str, Any]] | None = None,
) -> int:
    """How many ``cache_control`` markers a request carries (the API allows four)."""
    count = sum(1 for t in tools or () if "cache_control" in t)
    if system is not None and not isinstance(system, str):
        count += sum(1 for b in system if "cache_control" in b)
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            count += sum(1 for b in content if isinstance(b, dict) and "cache_control" in b)
    return count


def validate_wire(
    messages: Sequence[dict[str, Any]],
    system: Iterable[dict[str, Any]] | str | None = None,
    tools: Iterable[dict[str, Any]] | None = None,
) -> list[str]:
    """Every rule of the Messages API this request breaks, as short sentences ([] = valid).

    One pass over the blocks (it runs before every call, over the whole active view): each
    message's own rules, the cache markers, and per turn (consecutive same-role messages, as
    the API merges them) only the tool ids the pairing rules need.
    """
    scan = _Scan()
    for message in messages:
        scan.feed(message)
    return scan.problems(system, tools)


class WireCheck:
    """:func:`validate_wire` for the successive requests of one conversation, which share
    their beginning: the scan resumes after the prefix the previous request had too.

    The prefix is recognised by identity (the very same message dicts, which nothing
    mutates), so a view that changed anywhere (a compaction, an edit) is scanned afresh.
    """

    def __init__(self) -> None:
        self._kept: list[dict[str, Any]] = []
        self._scan = _Scan()

    def problems(
        self,
        messages: Sequence[dict[str, Any]],
        system: Iterable[dict[str, Any]] | str | None = None,
        tools: Iterable[dict[str, Any]] | None = None,
        *,
        stable: int,
    ) -> list[str]:
        """``validate_wire(messages, system, tools)``; the first ``stable`` messages are kept
        for the next call (the part of this request the next one will start with)."""
        kept = self._kept
        resumed = len(kept) <= len(messages) and all(map(operator.is_, kept, messages))
        scan = self._scan.copy() if resumed else _Scan()
        start = len(kept) if resumed else 0
        stable = min(stable, len(messages))
        for index in range(start, len(messages)):
            if index == stable:
                self._keep(messages, stable, scan)
            scan.feed(messages[index])
        if stable == len(messages) and stable >= start:
            self._keep(messages, stable, scan)
        return scan.problems(system, tools)

    def _keep(self, messages: Sequence[dict[str, Any]], stable: int, scan: _Scan) -> None:
        self._kept = list(messages[:stable])
        self._scan = scan.copy()


class _Scan:
    """The state of :func:`validate_wire`'s pass after some messages: what it found so far,
    and of the turns only what the pairing rules still need (the open turn and the one before)."""

    __slots__ = (
        "breakpoints",
        "count",
        "first_compaction",
        "first_role",
        "message_problems",
        "prev_role",
        "prev_uses",
        "results",
        "role",
        "seen_ids",
        "server_uses",
        "turn_problems",
        "uses",
    )

    def __init__(self) -> None:
        self.count = 0
        self.message_problems: list[str] = []
        self.turn_problems: list[str] = []
        self.breakpoints = 0
        self.first_role: str | None = None
        self.first_compaction = False
        self.prev_role: str | None = None
        self.prev_uses: list[str] = []
        self.role: str | None = None
        self.uses: list[str] = []
        self.results: list[str] = []
        self.seen_ids: set[str] = set()
        self.server_uses: set[str] = set()

    def copy(self) -> _Scan:
        other = _Scan()
        other.count = self.count
        other.message_problems = list(self.message_problems)
        other.turn_problems = list(self.turn_problems)
        other.breakpoints = self.breakpoints
        other.first_role, other.first_compaction = self.first_role, self.first_compaction
        other.prev_role, other.prev_uses = self.prev_role, self.prev_uses
        other.role, other.uses, other.results = self.role, list(self.uses), list(self.results)
        other.seen_ids = set(self.seen_ids)
        other.server_uses = set(self.server_uses)
        return other

    def feed(self, message: dict[str, Any]) -> None:
        index = self.count
        self.count += 1
        role = message.get("role")
        if role not in ("user", "assistant"):
            self.message_problems.append(f"messages.{index}.role: must be user or assistant, got {role!r}")
        if index == 0:
            self.first_role, self.first_compaction = str(role), _opens_with_compaction(message)
        if self.role != str(role):
            if self.role is not None:
                self._close()
            self.role, self.uses, self.results = str(role), [], []
            self.server_uses = set()
        content = message.get("content")
        if isinstance(content, str):
            if not content:
                self.message_problems.append(f"messages.{index}: content must be non-empty")
            return
        if not isinstance(content, list) or not content:
            self.message_problems.append(f"messages.{index}: content must be a non-empty list")
            return
        for b_index, block in enumerate(content):
            if not isinstance(block, dict):
                self.message_problems.append(f"messages.{index}.content.{b_index}: not a content block")
                continue
            if "cache_control" in block:
                self.breakpoints += 1
            kind = block.get("type")
            if "type" not in block:
                self.message_problems.append(f"messages.{index}.content.{b_index}: not a content block")
            elif kind == "text" and not str(block.get("text", "")):
                self.message_problems.append(
                    f"messages.{index}.content.{b_index}: text content blocks must be non-empty"
                )
            elif kind == "tool_use":
                self.uses.append(str(block.get("id")))
            elif kind == "tool_result":
                self.results.append(str(block.get("tool_use_id")))
            elif kind in SERVER_BLOCKS:
                self._server_block(index, b_index, role, block)

    def _server_block(self, index: int, b_index: int, role: Any, block: dict[str, Any]) -> None:
        """A server tool's call and result are the API's own: sent back as they came, in the
        assistant turn that holds them (a paused turn may continue in a second message), the
        result after its call; no client tool_result."""
        where = f"messages.{index}.content.{b_index}"
        if role != "assistant":
            self.message_problems.append(
                f"{where}: {block.get('type')} blocks are only allowed in assistant messages"
            )
        elif block.get("type") == "server_tool_use":
            self.server_uses.add(str(block.get("id")))
        elif str(block.get("tool_use_id")) not in self.server_uses:
            self.message_problems.append(
                f"{where}: tool_search_tool_result must follow its server_tool_use block in the same turn"
            )

    def _close(self) -> None:
        """The open turn is complete: the rules between it and the turn before, and its own."""
        problems = self.turn_problems
        if self.prev_role == "assistant" and self.prev_uses:
            answered = set(self.results)
            missing = [u for u in self.prev_uses if u not in answered]
            if missing:
                problems.append(
                    "tool_use ids were found without tool_result blocks immediately after: "
                    + ", ".join(missing)
                )
        if self.role == "assistant":
            for use_id in self.uses:
                if use_id in self.seen_ids:
                    problems.append(f"tool_use ids must be unique: {use_id}")
                self.seen_ids.add(use_id)
        elif self.role == "user" and self.results:
            offered = set(self.prev_uses) if self.prev_role == "assistant" else set()
            orphans = [r for r in self.results if r not in offered]
            if orphans:
                problems.append(
                    "unexpected tool_use_id found in tool_result blocks: "
                    + ", ".join(orphans)
                    + ". Each tool_result block must have a corresponding tool_use block "
                    "in the previous message."
                )
        self.prev_role, self.prev_uses = self.role, self.uses

    def problems(
        self, system: Iterable[dict[str, Any]] | str | None, tools: Iterable[dict[str, Any]] | None
    ) -> list[str]:
        """Every problem of the messages fed so far with ``system`` and ``tools`` (this state
        is left as it was, so more messages may follow)."""
        if not self.count:
            return ["messages: at least one message is required"]
        end = self.copy()
        end._close()
        problems = list(self.message_problems)
        breakpoints = self.breakpoints + sum(1 for t in tools or () if "cache_control" in t)
        if system is not None and not isinstance(system, str):
            breakpoints += sum(1 for b in system if "cache_control" in b)
        if breakpoints > MAX_CACHE_BREAKPOINTS:
            problems.append(
                f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {breakpoints}."
            )
        if self.first_role != "user" and not self.first_compaction:
            # A compaction block may open the conversation in an assistant message of its own.
            problems.append("messages: the first message must use the user role")
        return problems + end.turn_problems


def _opens_with_compaction(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return (
        isinstance(content, list)
        and bool(content)
        and isinstance(content[0], dict)
        and (content[0].get("type") == "compaction")
    )


def validate_messages(messages: Sequence[ChatMessage]) -> list[str]:
    """:func:`validate_wire` for domain messages."""
    return validate_wire([m.to_wire() for m in messages])


def repair_tool_pairs(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Drop tool_use blocks whose result is not in the next user turn, and tool_results
    whose tool_use is not in the previous assistant turn; drop messages left empty.

    A trailing assistant tool_use (a round still in progress) is kept.
    """
    result: list[ChatMessage] = list(messages)
    # Two passes: dropping an orphan result can orphan nothing else, but dropping a
    # tool_use can orphan its (misplaced) result, so settle until nothing changes.
    for _ in range(3):
        repaired = _repair_once(result)
        if repaired == result:
            break
        result = repaired
    return result


def _repair_once(messages: list[ChatMessage]) -> list[ChatMessage]:
    # Group indices into same-role turns, as the API does.
    turns: list[list[int]] = []
    for index, message in enumerate(messages):
        if turns and messages[turns[-1][0]].role == message.role:
            turns[-1].append(index)
        else:
            turns.append([index])

    def ids(turn: list[int], kind: str, key: str) -> set[str]:
        return {str(b.get(key)) for i in turn for b in messages[i].content if b.get("type") == kind}

    drop_blocks: dict[int, set[int]] = {}
    for t_index, turn in enumerate(turns):
        role = messages[turn[0]].role
        if role == "assistant":
            is_last = t_index == len(turns) - 1
            answered = ids(turns[t_index + 1], "tool_result", "tool_use_id") if not is_last else None
            if answered is None:
                continue
            for i in turn:
                for b_index, block in enumerate(messages[i].content):
                    if block.get("type") == "tool_use" and str(block.get("id")) not in answered:
                        drop_blocks.setdefault(i, set()).add(b_index)
        else:
            prev = turns[t_index - 1] if t_index > 0 else []
            offered = ids(prev, "tool_use", "id") if prev else set()
            for i in turn:
                for b_index, block in enumerate(messages[i].content):
                    if block.get("type") == "tool_result" and str(block.get("tool_use_id")) not in offered:
                        drop_blocks.setdefault(i, set()).add(b_index)
    if not drop_blocks:
        return messages
    out: list[ChatMessage] = []
    for index, message in enumerate(messages):
        dropped = drop_blocks.get(index)
        if not dropped:
            out.append(message)
            continue
        kept: list[ContentBlock] = [b for j, b in enumerate(message.content) if j not in dropped]
        if kept:
            out.append(message.with_content(kept))
    return out
