"""One request waiting for its answer: what the gateway's sends and edits become for the HTTP side.

The gateway answers a platform by sending (the whole reply) or, while a reply is written, by
posting and editing one message. Here both feed the request's queue of events: an edit becomes
the text added since the last one (a server-sent delta), the final send or the end of the stream
the finished answer, and a failure reply an OpenAI-shaped error.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from gateway.platforms.http_api.errors import ApiError

FinishReason = Literal["stop", "content_filter"]
STATUS_MARK = "⏳ "
"""How a live reply shows a tool round (``agent.llm_stream.tool_status``): not part of the answer."""


@dataclass(frozen=True, slots=True)
class Delta:
    text: str


@dataclass(frozen=True, slots=True)
class Finished:
    text: str
    reason: FinishReason


@dataclass(frozen=True, slots=True)
class Failed:
    error: ApiError


Event = Delta | Finished | Failed


class Exchange:
    """The events of one request's answer, in order; ``stream`` says whether it is shown while written."""

    def __init__(self, message_id: str, chat_id: str, *, stream: bool) -> None:
        self.message_id = message_id
        self.chat_id = chat_id
        self.stream = stream
        self.events: asyncio.Queue[Event] = asyncio.Queue()
        self.closed = False
        self._sent = ""
        """What the deltas so far add up to, since the model's current call began."""
        self.streamed = ""
        """Everything the deltas said (the final answer when streaming)."""

    def show(self, display: str) -> None:
        """The live reply now shows ``display``: send what was added. A new model call after a tool
        round starts a new paragraph (a stream can only grow, never take back)."""
        if self.closed or display.startswith(STATUS_MARK) or not display.strip():
            return
        if display.startswith(self._sent):
            added = display[len(self._sent) :]
        else:
            added = ("\n\n" if self.streamed else "") + display
        self._sent = display
        if added:
            self.streamed += added
            self.events.put_nowait(Delta(added))

    def finish(self, text: str, reason: FinishReason = "stop") -> None:
        if self.closed:
            return
        if self.stream and text.startswith(self.streamed) and text != self.streamed:
            # Sent whole (streaming fell back to the outbox, or showed nothing yet): the rest of it.
            added = text[len(self.streamed) :]
            self.streamed = text
            self.events.put_nowait(Delta(added))
        self.closed = True
        self.events.put_nowait(Finished(text, reason))

    def fail(self, error: ApiError) -> None:
        if self.closed:
            return
        self.closed = True
        self.events.put_nowait(Failed(error))
