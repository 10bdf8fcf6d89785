"""Streaming: the model's text as it is written, for a listener that shows it while the turn runs.

A provider that can stream implements :class:`StreamingProvider` (``stream`` takes the same
request as ``create`` and returns the same :class:`LLMResponse` at the end, calling ``on_text``
with each piece of visible text on the way). The loop tells a :class:`TurnListener` when a call
starts, each text delta, and each tool it runs, so the gateway can show a live reply with a
short status line during tool rounds. Listeners are synchronous and must not block: they only
record; the gateway's own task does the slow work (platform edits) at its own pace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from agent.provider import LLMRequest, LLMResponse

TextSink = Callable[[str], None]


@runtime_checkable
class StreamingProvider(Protocol):
    """A provider that can also answer a request as a stream of text deltas."""

    async def stream(self, request: LLMRequest, on_text: TextSink) -> LLMResponse: ...


class TurnListener(Protocol):
    """What a running turn reports as it goes (all synchronous, never blocking)."""

    def call_started(self) -> None:
        """A model call begins: the text that follows replaces what was shown."""

    def text(self, delta: str) -> None:
        """More visible text of the current call."""

    def tool_started(self, name: str) -> None:
        """The model called ``name``; the turn goes on after the tool round."""


TOOL_STATUS: dict[str, str] = {
    "session_search": "searching the conversation…",
    "recall": "looking through the archive…",
    "memory": "checking my notes…",
    "schedule": "setting up a reminder…",
}


def tool_status(name: str) -> str:
    """The short line shown while ``name`` runs."""
    return TOOL_STATUS.get(name, f"using {name}…")
