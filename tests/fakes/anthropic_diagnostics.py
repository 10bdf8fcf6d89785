"""Cache diagnostics for the fake Anthropic server, as the real API does them (GA, no beta header).

A request that carries ``diagnostics`` gets a fingerprint kept under its response id: the model,
a digest of the tools, of the system prompt, of each message block (``cache_control`` left out,
as the cache ignores where the breakpoints sit), of the other prompt-affecting parameters
(``thinking``, ``tool_choice``) and the prompt's token counts. A request that names an earlier
response in ``diagnostics.previous_message_id`` is compared with that fingerprint and the answer
carries ``diagnostics.cache_miss_reason`` at the first divergence, in prefix order:
``model_changed``, ``tools_changed``, ``system_changed``, ``messages_changed`` (an earlier entry
differs rather than entries only appended), ``unavailable`` (only other parameters differ, or
:meth:`Diagnostics.unavailable_next`), ``previous_message_not_found`` (no fingerprint under
that id: never kept, forgotten, or of a request without ``diagnostics``). No divergence:
``"diagnostics": null``. Requests without the field keep nothing and get no ``diagnostics``.

``diagnostics`` is refused as the API refuses a malformed field: not an object, a key other
than ``previous_message_id``, no such key, or an id that is not a string or null.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from tests.fakes.anthropic_cache import segments, tokens_for_chars, weight


@dataclass(frozen=True, slots=True)
class Fingerprint:
    model: str
    tools: str
    system: str
    others: str
    messages: tuple[str, ...]
    # Tokens of the prompt up to the end of the tools, of the system, and after each message block.
    tools_tokens: int
    system_tokens: int
    message_tokens: tuple[int, ...]

    @property
    def total(self) -> int:
        return self.message_tokens[-1] if self.message_tokens else self.system_tokens


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def fingerprint(body: dict[str, Any]) -> Fingerprint:
    """The fingerprint of a request: hashes and token counts, never the prompt itself."""
    parts, _ = segments(body)
    tools: list[str] = []
    system: list[str] = []
    messages: list[str] = []
    running = 0
    tools_tokens = system_tokens = 0
    sums: list[int] = []
    for part in parts:
        running += weight(part)
        if part.startswith('{"block"'):
            messages.append(hashlib.sha256(part.encode()).hexdigest())
            sums.append(tokens_for_chars(running))
        elif part.startswith('{"system"'):
            system.append(part)
            system_tokens = tokens_for_chars(running)
        else:
            tools.append(part)
            tools_tokens = system_tokens = tokens_for_chars(running)
    others = json.dumps([body.get("thinking"), body.get("tool_choice")], sort_keys=True)
    return Fingerprint(
        model=str(body.get("model")),
        tools=_digest(tools),
        system=_digest(system),
        others=others,
        messages=tuple(messages),
        tools_tokens=tools_tokens,
        system_tokens=system_tokens,
        message_tokens=tuple(sums),
    )


def diagnostics_problem(body: dict[str, Any]) -> str | None:
    """Why the API would refuse the request's ``diagnostics`` field (None: it is well formed)."""
    if "diagnostics" not in body:
        return None
    value = body["diagnostics"]
    if not isinstance(value, dict):
        return "diagnostics: Input should be a valid dictionary or object"
    for key in value:
        if key != "previous_message_id":
            return f"diagnostics.{key}: Extra inputs are not permitted"
    if "previous_message_id" not in value:
        return "diagnostics.previous_message_id: Field required"
    previous = value["previous_message_id"]
    if previous is not None and (not isinstance(previous, str) or not previous):
        return "diagnostics.previous_message_id: Input should be a valid string"
    return None


def _miss(kind: str, tokens: int | None = None) -> dict[str, Any]:
    reason: dict[str, Any] = {"type": kind}
    if tokens is not None:
        reason["cache_missed_input_tokens"] = tokens
    return {"cache_miss_reason": reason}


class Diagnostics:
    """The fingerprints the fake keeps, and the comparison it answers with."""

    def __init__(self) -> None:
        self.kept: dict[str, Fingerprint] = {}
        self._unavailable = 0
        self.answered: list[str | None] = []
        """The reason type of every diagnosed answer, in order (None: no divergence)."""

    def unavailable_next(self, times: int = 1) -> None:
        """The next diagnosed answers cannot be compared (the API's ``unavailable``)."""
        self._unavailable += times

    def forget(self) -> None:
        """Drop every fingerprint (they are kept a limited time): next, ``previous_message_not_found``."""
        self.kept.clear()

    def answer(self, body: dict[str, Any], response_id: str) -> dict[str, Any] | None:
        """The response's ``diagnostics`` for a request that carries them; keeps its fingerprint."""
        now = fingerprint(body)
        previous = body["diagnostics"]["previous_message_id"]
        self.kept[response_id] = now
        result = None if previous is None else self._compare(self.kept.get(previous), now)
        reason = result["cache_miss_reason"]["type"] if result else None
        self.answered.append(reason)
        return result

    def _compare(self, before: Fingerprint | None, now: Fingerprint) -> dict[str, Any] | None:
        if self._unavailable > 0:
            self._unavailable -= 1
            return _miss("unavailable")
        if before is None:
            return _miss("previous_message_not_found")
        if before.model != now.model:
            return _miss("model_changed", before.total)
        if before.tools != now.tools:
            return _miss("tools_changed", before.total)
        if before.system != now.system:
            return _miss("system_changed", max(before.total - before.tools_tokens, 0))
        if now.messages[: len(before.messages)] != before.messages:
            same = 0
            for a, b in zip(before.messages, now.messages, strict=False):
                if a != b:
                    break
                same += 1
            reused = before.message_tokens[same - 1] if same else before.system_tokens
            return _miss("messages_changed", max(before.total - reused, 0))
        if before.others != now.others:
            return _miss("unavailable")
        return None
