"""Server-side context management for the fake Anthropic API, as documented (docs/server-side-context.md).

:class:`ServerContext` checks a request's ``context_management`` edits, its ``compaction``
parameter and every ``compaction`` block it carries, and works out the prompt the model would
see: everything before a threshold block dropped, old tool results cleared. It refuses what
the API documents it refuses (an unknown edit type, a missing beta header, a block whose
content or signature was changed, a block not first, two blocks). Blocks are signed with an
HMAC only this fake knows, so a client cannot forge or edit one.

What the documentation leaves open, the fake decides (and a test can rely on it): a clear
empties the result of every clearable tool use but the newest ``keep`` (oldest first), into
:data:`CLEARED_PLACEHOLDER`; it is applied only when the unedited prompt is over ``trigger``
and it frees at least ``clear_at_least``.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import math
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.types import content_text
from tests.fakes.anthropic_cache import CacheUsage

CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
COMPACTION_BETA = "compact-2026-09-04"
THRESHOLD_COMPACTION_BETA = "compact-2026-01-12"
# Written out here, not imported from agent.server_context: the fake must not share what it checks.
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
THRESHOLD_COMPACT = "compact_20260112"
EDIT_TYPES = (CLEAR_TOOL_USES, CLEAR_THINKING, THRESHOLD_COMPACT)
CLEARED_PLACEHOLDER = "[tool result cleared by context management]"
DEFAULT_CLEAR_TRIGGER = 100_000
DEFAULT_KEEP = 3
DEFAULT_COMPACT_TRIGGER = 150_000
MIN_COMPACT_TRIGGER = 50_000
MAX_INSTRUCTIONS = 16_384
# The fields a compaction block comes back with; anything else is "Extra inputs are not permitted".
BLOCK_FIELDS = frozenset(
    {"type", "content", "signature", "encrypted_content", "tool_changes", "cache_control"}
)


THRESHOLD_TRIGGER = 150_000  # compact_20260112's default trigger


def out_tokens(content: Any) -> int:
    return max(1, math.ceil(len(json.dumps(content, ensure_ascii=False)) / 4))


def iteration(kind: str, cached: CacheUsage, output: int) -> dict[str, Any]:
    return {
        "type": kind,
        "input_tokens": cached.input_tokens,
        "output_tokens": output,
        "cache_creation_input_tokens": cached.cache_creation_input_tokens,
        "cache_read_input_tokens": cached.cache_read_input_tokens,
    }


def summary_of(body: dict[str, Any]) -> str:
    """The fake's server-side summary: deterministic, and naming what it summarized."""
    messages = body.get("messages") or []
    return (
        f"Summary of the conversation ({len(messages)} messages): the user last said: "
        f"{_last_user_text(body)[:200]}"
    )


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else content_text(content or [])
    return ""


class Refused(Exception):
    """The request breaks a documented rule: a 400 ``invalid_request_error`` with this message."""

    def __init__(self, message: str, error_code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.error_code = error_code


def beta_list(headers: dict[str, str]) -> set[str]:
    """The betas of an ``anthropic-beta`` header (comma-separated)."""
    return {b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()}


@dataclass(slots=True)
class Prepared:
    """A request as the model would see it, and what the server did to it."""

    body: dict[str, Any]
    applied_edits: list[dict[str, Any]] = field(default_factory=list)
    threshold: dict[str, Any] | None = None  # the compact_20260112 edit, when requested
    on_demand: dict[str, Any] | None = None  # the compaction parameter, when sent
    iterations: bool = False  # whether the response reports usage.iterations


@dataclass(slots=True)
class ServerContext:
    """Edits, compaction and block signatures of one fake server."""

    key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    issued: dict[str, str] = field(default_factory=dict)  # signature -> the content it signed
    issued_unsigned: set[str] = field(default_factory=set)  # contents of threshold blocks
    compactions: int = 0

    # signing ---------------------------------------------------------------------------------
    def sign(self, content: str) -> str:
        digest = hmac.new(self.key, content.encode(), hashlib.sha256).digest()
        signature = base64.b64encode(b"EuYB" + digest).decode()
        self.issued[signature] = content
        return signature

    def signed_block(self, content: str) -> dict[str, Any]:
        """A compaction block of an on-demand compaction."""
        self.compactions += 1
        return {"type": "compaction", "content": content, "signature": self.sign(content)}

    def threshold_block(self, content: str) -> dict[str, Any]:
        """A compaction block of threshold compaction (no signature, as the docs show it)."""
        self.compactions += 1
        self.issued_unsigned.add(content)
        return {"type": "compaction", "content": content}

    def on_demand_message(
        self, body: dict[str, Any], prepared: Prepared, tokens: int, failure: str | None
    ) -> dict[str, Any]:
        """The answer to an on-demand compaction of a ``tokens``-token prompt: the signed block
        alone (or, with ``failure``, no content and that stop reason), billed in iterations."""
        content: list[dict[str, Any]] = []
        output = 0
        if failure is None:
            block = self.signed_block(summary_of(prepared.body))
            content, output = [block], out_tokens(block)
        zero = {
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": failure or "compaction",
            "stop_sequence": None,
            "usage": {**zero, "iterations": [iteration("compaction", CacheUsage(tokens, 0, 0), output)]},
        }

    # checks ----------------------------------------------------------------------------------
    def prepare(
        self, body: dict[str, Any], headers: dict[str, str], count: Callable[[dict[str, Any]], int]
    ) -> Prepared:
        """Check the request's server-side context management and build the prompt the model sees.

        Raises :class:`Refused` for what the API refuses.
        """
        betas = beta_list(headers)
        edits = self._edits(body, betas)
        blocks = self._carried(body, betas)
        prepared = Prepared(copy.deepcopy(body))
        prepared.iterations = bool(betas & {COMPACTION_BETA, THRESHOLD_COMPACTION_BETA})
        if "compaction" in body:
            prepared.on_demand = self._compaction_param(body, betas)
        threshold = [e for e in edits if e["type"] == THRESHOLD_COMPACT]
        if threshold:
            if any("signature" in b for b in blocks):
                raise Refused(
                    "context_management: compact_20260112 can't run on a request that carries "
                    "a signed compaction block"
                )
            prepared.threshold = threshold[0]
        if blocks and not any("signature" in b for b in blocks):
            _drop_before_last_block(prepared.body)
        for edit in edits:
            if edit["type"] == CLEAR_TOOL_USES:
                applied = _clear_tool_uses(prepared.body, edit, count)
                if applied is not None:
                    prepared.applied_edits.append(applied)
        return prepared

    def _edits(self, body: dict[str, Any], betas: set[str]) -> list[dict[str, Any]]:
        managed = body.get("context_management")
        if managed is None:
            return []
        if not isinstance(managed, dict) or not isinstance(managed.get("edits"), list):
            raise Refused("context_management.edits: Field required")
        edits: list[dict[str, Any]] = managed["edits"]
        for index, edit in enumerate(edits):
            where = f"context_management.edits.{index}"
            kind = edit.get("type") if isinstance(edit, dict) else None
            if kind not in EDIT_TYPES:
                expected = ", ".join(f"'{t}'" for t in EDIT_TYPES)
                raise Refused(
                    f"{where}: Input tag '{kind}' found using 'type' does not match any of the "
                    f"expected tags: {expected}"
                )
            beta = THRESHOLD_COMPACTION_BETA if kind == THRESHOLD_COMPACT else CONTEXT_MANAGEMENT_BETA
            if beta not in betas:
                raise Refused(f"{where}: '{kind}' requires the anthropic-beta header '{beta}'")
            if kind == CLEAR_THINKING and index != 0:
                raise Refused(f"{where}: clear_thinking_20251015 must be the first edit")
            if kind == CLEAR_TOOL_USES:
                _check_clear(edit, where)
            elif kind == THRESHOLD_COMPACT:
                _check_threshold(edit, where)
        if "compaction" in body:
            raise Refused("compaction: can't be combined with context_management on one request")
        return edits

    def _compaction_param(self, body: dict[str, Any], betas: set[str]) -> dict[str, Any]:
        param = body["compaction"]
        if COMPACTION_BETA not in betas:
            raise Refused(f"compaction: this parameter requires anthropic-beta: {COMPACTION_BETA}")
        if not isinstance(param, dict) or param.get("type") != "summarize":
            raise Refused("compaction.type: Input should be 'summarize'")
        extra = set(param) - {"type", "instructions"}
        if extra:
            raise Refused(f"compaction.{sorted(extra)[0]}: Extra inputs are not permitted")
        instructions = param.get("instructions")
        if instructions is not None and (
            not isinstance(instructions, str) or len(instructions) > MAX_INSTRUCTIONS
        ):
            raise Refused(
                f"compaction.instructions: must be a string of at most {MAX_INSTRUCTIONS} characters"
            )
        if "stop_sequences" in body:
            raise Refused("stop_sequences: can't be used with compaction")
        tool_choice = body.get("tool_choice")
        if isinstance(tool_choice, dict) and tool_choice.get("type") in ("any", "tool"):
            raise Refused("tool_choice: can't force a tool on a compaction request")
        messages = body.get("messages") or []
        if not any(_has_content(m) for m in messages):
            raise Refused("messages: nothing to summarize", "compaction_nothing_to_summarize")
        last = messages[-1] if messages else None
        if isinstance(last, dict) and last.get("role") == "assistant":
            content = last.get("content")
            if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_use" for b in content
            ):
                raise Refused("messages: the last assistant turn ends in a tool call without its result")
        return param

    def _carried(self, body: dict[str, Any], betas: set[str]) -> list[dict[str, Any]]:
        """Check every compaction block of the request; returns them in order."""
        found: list[tuple[int, int, dict[str, Any]]] = []
        for m_index, message in enumerate(body.get("messages") or []):
            content = message.get("content") if isinstance(message, dict) else None
            if not isinstance(content, list):
                continue
            for b_index, block in enumerate(content):
                if isinstance(block, dict) and block.get("type") == "compaction":
                    found.append((m_index, b_index, block))
        if not found:
            return []
        if len(found) > 1 and any("signature" in b for _, _, b in found):
            raise Refused("messages: a request may carry only one compaction block; send the newest")
        for m_index, b_index, block in found:
            where = f"messages.{m_index}.content.{b_index}"
            signed = "signature" in block
            beta = COMPACTION_BETA if signed else THRESHOLD_COMPACTION_BETA
            if beta not in betas:
                raise Refused(
                    f"{where}: Input tag 'compaction' found using 'type' does not match any of "
                    "the expected tags"
                )
            extra = set(block) - BLOCK_FIELDS
            if extra:
                raise Refused(f"{where}.compaction.{sorted(extra)[0]}: Extra inputs are not permitted")
            content = block.get("content")
            if content is not None and not isinstance(content, str):
                raise Refused(f"{where}.content: Input should be a valid string")
            if signed:
                if (m_index, b_index) != (0, 0):
                    raise Refused(
                        f"{where}: messages remain in front of the compaction block",
                        "compaction_block_misplaced",
                    )
                issued = self.issued.get(str(block["signature"]))
                if issued is None:
                    raise Refused(f"{where}.signature: invalid signature", "compaction_signature_invalid")
                if issued != content:
                    raise Refused(
                        f"{where}.content: does not match its signature", "compaction_content_mismatch"
                    )
            elif content is not None and content not in self.issued_unsigned:
                raise Refused(
                    f"{where}.content: not the content the API returned", "compaction_content_mismatch"
                )
        return [b for _, _, b in found]


def _has_content(message: Any) -> bool:
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        return False
    content = message.get("content")
    return bool(content)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _check_amount(edit: dict[str, Any], name: str, where: str, kinds: tuple[str, ...]) -> None:
    value = edit.get(name)
    if value is None:
        return
    if not isinstance(value, dict) or value.get("type") not in kinds or not _positive_int(value.get("value")):
        raise Refused(
            f"{where}.{name}: must be {{'type': one of {list(kinds)}, 'value': a positive integer}}"
        )
    if set(value) - {"type", "value"}:
        raise Refused(f"{where}.{name}: Extra inputs are not permitted")


def _check_clear(edit: dict[str, Any], where: str) -> None:
    extra = set(edit) - {"type", "trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"}
    if extra:
        raise Refused(f"{where}.{sorted(extra)[0]}: Extra inputs are not permitted")
    _check_amount(edit, "trigger", where, ("input_tokens", "tool_uses"))
    _check_amount(edit, "keep", where, ("tool_uses",))
    _check_amount(edit, "clear_at_least", where, ("input_tokens",))
    exclude = edit.get("exclude_tools")
    if exclude is not None and not (isinstance(exclude, list) and all(isinstance(t, str) for t in exclude)):
        raise Refused(f"{where}.exclude_tools: must be a list of tool names")
    inputs = edit.get("clear_tool_inputs")
    if inputs is not None and not isinstance(inputs, bool | list):
        raise Refused(f"{where}.clear_tool_inputs: must be a boolean or a list of tool names")


def _check_threshold(edit: dict[str, Any], where: str) -> None:
    extra = set(edit) - {"type", "trigger", "pause_after_compaction", "instructions"}
    if extra:
        raise Refused(f"{where}.{sorted(extra)[0]}: Extra inputs are not permitted")
    _check_amount(edit, "trigger", where, ("input_tokens",))
    trigger = edit.get("trigger")
    if trigger is not None and trigger["value"] < MIN_COMPACT_TRIGGER:
        raise Refused(f"{where}.trigger.value: must be at least {MIN_COMPACT_TRIGGER}")
    if not isinstance(edit.get("pause_after_compaction", False), bool):
        raise Refused(f"{where}.pause_after_compaction: Input should be a valid boolean")
    instructions = edit.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise Refused(f"{where}.instructions: Input should be a valid string")


def _drop_before_last_block(body: dict[str, Any]) -> None:
    """What the API does with a threshold block: every content block before it is ignored."""
    messages = body["messages"]
    for m_index in range(len(messages) - 1, -1, -1):
        content = messages[m_index].get("content")
        if not isinstance(content, list):
            continue
        for b_index in range(len(content) - 1, -1, -1):
            block = content[b_index]
            if isinstance(block, dict) and block.get("type") == "compaction":
                kept = {**messages[m_index], "content": content[b_index:]}
                body["messages"] = [kept, *messages[m_index + 1 :]]
                return


def _tool_names(body: dict[str, Any]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in body.get("messages") or []:
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    names[str(block.get("id"))] = str(block.get("name"))
    return names


def _clear_tool_uses(
    body: dict[str, Any], edit: dict[str, Any], count: Callable[[dict[str, Any]], int]
) -> dict[str, Any] | None:
    """Apply one clear_tool_uses edit to ``body`` in place: the applied edit, or None (not applied)."""
    before = count(body)
    names = _tool_names(body)
    trigger = edit.get("trigger") or {"type": "input_tokens", "value": DEFAULT_CLEAR_TRIGGER}
    reached = len(names) if trigger["type"] == "tool_uses" else before
    if reached <= trigger["value"]:
        return None
    excluded = set(edit.get("exclude_tools") or ())
    keep = (edit.get("keep") or {"value": DEFAULT_KEEP})["value"]
    clearable = [use_id for use_id, name in names.items() if name not in excluded]
    doomed = set(clearable[: max(0, len(clearable) - keep)])
    if not doomed:
        return None
    inputs = edit.get("clear_tool_inputs") or False
    edited = copy.deepcopy(body)
    cleared = 0
    for message in edited["messages"]:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result" and str(block.get("tool_use_id")) in doomed:
                if block.get("content") != CLEARED_PLACEHOLDER:
                    block["content"] = CLEARED_PLACEHOLDER
                    block.pop("is_error", None)
                    cleared += 1
            elif (
                block.get("type") == "tool_use"
                and str(block.get("id")) in doomed
                and (inputs is True or (isinstance(inputs, list) and block.get("name") in inputs))
            ):
                block["input"] = {}
    freed = before - count(edited)
    at_least = (edit.get("clear_at_least") or {"value": 0})["value"]
    if cleared == 0 or freed < at_least:
        return None
    body["messages"] = edited["messages"]
    return {"type": CLEAR_TOOL_USES, "cleared_tool_uses": cleared, "cleared_input_tokens": freed}
