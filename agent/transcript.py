"""Rules a transcript must satisfy for the Messages API, and the repair that restores them.

The same checks run in three places: before each real call (a last line of defence),
after every compaction, and in the fake Anthropic server used by the tests, so a
transcript the tests accept is one the real API accepts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agent.types import ChatMessage, ContentBlock

MAX_CACHE_BREAKPOINTS = 4


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
    problems: list[str] = []
    if not messages:
        return ["messages: at least one message is required"]
    breakpoints = sum(1 for t in tools or () if "cache_control" in t)
    if system is not None and not isinstance(system, str):
        breakpoints += sum(1 for b in system if "cache_control" in b)
    # Per turn: role, tool_use ids, tool_result ids.
    turns: list[tuple[str, list[str], list[str]]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            problems.append(f"messages.{index}.role: must be user or assistant, got {role!r}")
        if not turns or turns[-1][0] != str(role):
            turns.append((str(role), [], []))
        uses, results = turns[-1][1], turns[-1][2]
        content = message.get("content")
        if isinstance(content, str):
            if not content:
                problems.append(f"messages.{index}: content must be non-empty")
            continue
        if not isinstance(content, list) or not content:
            problems.append(f"messages.{index}: content must be a non-empty list")
            continue
        for b_index, block in enumerate(content):
            if not isinstance(block, dict):
                problems.append(f"messages.{index}.content.{b_index}: not a content block")
                continue
            if "cache_control" in block:
                breakpoints += 1
            kind = block.get("type")
            if "type" not in block:
                problems.append(f"messages.{index}.content.{b_index}: not a content block")
            elif kind == "text" and not str(block.get("text", "")):
                problems.append(f"messages.{index}.content.{b_index}: text content blocks must be non-empty")
            elif kind == "tool_use":
                uses.append(str(block.get("id")))
            elif kind == "tool_result":
                results.append(str(block.get("tool_use_id")))
    if breakpoints > MAX_CACHE_BREAKPOINTS:
        problems.append(
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {breakpoints}."
        )
    if turns and turns[0][0] != "user" and not _opens_with_compaction(messages[0]):
        # A compaction block may open the conversation in an assistant message of its own.
        problems.append("messages: the first message must use the user role")
    seen_ids: set[str] = set()
    for t_index, (role, uses, results) in enumerate(turns):
        if role == "assistant":
            for use_id in uses:
                if use_id in seen_ids:
                    problems.append(f"tool_use ids must be unique: {use_id}")
                seen_ids.add(use_id)
            if uses and t_index + 1 < len(turns):
                answered = set(turns[t_index + 1][2])
                missing = [u for u in uses if u not in answered]
                if missing:
                    problems.append(
                        "tool_use ids were found without tool_result blocks immediately after: "
                        + ", ".join(missing)
                    )
        elif role == "user" and results:
            previous = turns[t_index - 1] if t_index > 0 and turns[t_index - 1][0] == "assistant" else None
            offered = set(previous[1]) if previous is not None else set()
            orphans = [r for r in results if r not in offered]
            if orphans:
                problems.append(
                    "unexpected tool_use_id found in tool_result blocks: "
                    + ", ".join(orphans)
                    + ". Each tool_result block must have a corresponding tool_use block "
                    "in the previous message."
                )
    return problems


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
