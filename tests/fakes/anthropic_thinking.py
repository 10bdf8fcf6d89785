"""Thinking blocks and the 5.x request rules of the fake Anthropic API.

A reply's ``thinking`` block is signed by the server for the model that wrote it (an HMAC of
the model and the thinking text under a secret of this server); a ``redacted_thinking``
block carries its text sealed in ``data`` the same way. On the way back in, every thinking
block of an assistant message must carry a signature that verifies for the REQUEST's model
and text: a missing one, a modified block, or a block replayed to another model is a 400, as
the API answers. The 5.x models (Fable included) refuse manual extended thinking
(``thinking.type`` "enabled" with a budget) and non-default sampling (temperature, top_p,
top_k); Opus 5.5, Sonnet 5.5 and the Fable models cannot have thinking disabled.

The API strips thinking blocks of earlier turns from the prompt (they do not count against the
window): :func:`stripped_for_counting` is what the fake counts and caches.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from typing import Any

_SECRET = b"fake-anthropic-thinking"
# The models that take only adaptive thinking and default sampling: every 5.x name.
_FIVE = re.compile(r"claude-(?:(?:opus|sonnet|haiku)-5(?:-|$)|fable-|mythos-)")
# Adaptive thinking always on: "disabled" is a 400 (and "enabled" on every 5.x model).
_ALWAYS_THINKS = ("claude-opus-5-5", "claude-sonnet-5-5", "claude-fable-", "claude-mythos-")
# Where the text between tool calls comes back in thinking blocks whose text is empty unless
# the request asks for ``"display": "summarized"``.
_OMITS_BY_DEFAULT = ("claude-opus-5-5", "claude-sonnet-5-5")
DEFAULT_TEMPERATURE = 1.0


def _mac(model: str, text: str) -> str:
    digest = hmac.new(_SECRET, f"{model}\x00{text}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def shown(body: dict[str, Any]) -> bool:
    """Whether this request gets the text of thinking blocks (else the 5.5 models omit it)."""
    if not any(model in str(body.get("model", "")) for model in _OMITS_BY_DEFAULT):
        return True
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("display") == "summarized"


def sign(block: dict[str, Any], model: str, *, show: bool = True) -> dict[str, Any]:
    """``block`` as the API returns it: a thinking block with its signature (its text empty when
    not ``show``n; the signature still covers it), a redacted one sealed."""
    if block.get("type") == "thinking":
        text = str(block.get("thinking", ""))
        return {"type": "thinking", "thinking": text if show else "", "signature": _seal(model, text)}
    if block.get("type") == "redacted_thinking":
        return {"type": "redacted_thinking", "data": _seal(model, str(block.get("data", "")))}
    return block


def _seal(model: str, text: str) -> str:
    return base64.b64encode(f"{_mac(model, text)}|{text}".encode()).decode()


def _unseal(sealed: Any, model: str) -> str | None:
    """The text a signature (or redacted data) seals for ``model``; None when it is not valid there."""
    try:
        mac, _, text = base64.b64decode(str(sealed).encode(), validate=True).decode().partition("|")
    except (ValueError, UnicodeDecodeError):
        return None
    return text if hmac.compare_digest(mac, _mac(model, text)) else None


def _redacted_ok(data: Any, model: str) -> bool:
    return _unseal(data, model) is not None


def thinking_problems(body: dict[str, Any]) -> list[str]:
    """Why the API would refuse the thinking blocks (or the 5.x parameters) of this request."""
    model = str(body.get("model", ""))
    problems: list[str] = []
    if _FIVE.search(model):
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") == "enabled":
            problems.append(
                f"thinking.type.enabled: manual extended thinking is not supported on {model}; "
                "use thinking.type.adaptive"
            )
        if (
            isinstance(thinking, dict)
            and thinking.get("type") == "disabled"
            and any(name in model for name in _ALWAYS_THINKS)
        ):
            problems.append(f"thinking: cannot be disabled on {model}")
        temperature = body.get("temperature")
        if temperature is not None and temperature != DEFAULT_TEMPERATURE:
            problems.append(f"temperature: only the default value is supported on {model}")
        for name in ("top_p", "top_k"):
            if name in body:
                problems.append(f"{name}: is not supported on {model}")
    for m_index, message in enumerate(body.get("messages") or []):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        for b_index, block in enumerate(content if isinstance(content, list) else []):
            where = f"messages.{m_index}.content.{b_index}"
            if not isinstance(block, dict):
                continue
            if block.get("type") == "thinking":
                signature = block.get("signature")
                if not signature:
                    problems.append(f"{where}.thinking.signature: Field required")
                elif (sealed := _unseal(signature, model)) is None or block.get("thinking", "") not in (
                    "",
                    sealed,
                ):
                    # Omitted text ("") is fine: the signature carries the whole thinking.
                    problems.append(f"{where}: Invalid `signature` in `thinking` block")
            elif block.get("type") == "redacted_thinking" and not _redacted_ok(block.get("data"), model):
                problems.append(f"{where}: Invalid `data` in `redacted_thinking` block")
    return problems


def _starts_turn(message: Any) -> bool:
    """A user message that is not only tool results: where a new turn begins."""
    if not isinstance(message, dict) or message.get("role") != "user":
        return False
    content = message.get("content")
    if not isinstance(content, list):
        return True
    return not all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def stripped_for_counting(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without the thinking blocks of earlier turns (the API drops them from the prompt)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body
    last_turn = max((i for i, m in enumerate(messages) if _starts_turn(m)), default=-1)
    out: list[Any] = []
    changed = False
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if index < last_turn and message.get("role") == "assistant" and isinstance(content, list):
            kept = [b for b in content if not (isinstance(b, dict) and "thinking" in str(b.get("type")))]
            if len(kept) != len(content):
                message = {**message, "content": kept}
                changed = True
        out.append(message)
    return {**body, "messages": out} if changed else body
