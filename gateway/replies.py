"""Replies on their way out: the outbox row first, then the inbox items it answers, then delivery.

The order is what makes replies exactly-once: an inbox item is marked done only after its
reply is in the outbox, so a crash in between re-serves the item and finds the reply.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agent.types import ChatMessage
from gateway.delivery import Delivery, target_to_dict
from gateway.platforms.base import OutboundTarget
from gateway.store.records import InboxRecord
from gateway.store.repository import Store

TYPING_EVERY_SECONDS = 4.0


@dataclass(frozen=True, slots=True)
class PendingItem:
    """An addressed inbox item already appended to the conversation as ``message``."""

    item: InboxRecord
    message: ChatMessage


def reply_target(item: InboxRecord) -> OutboundTarget:
    """Where the answer to ``item`` goes: its chat and thread, quoting it."""
    thread = item.payload.get("thread_id")
    # A scheduled task's run is no platform message: there is nothing to quote.
    quoted = None if item.payload.get("scheduled_task") else item.platform_message_id
    return OutboundTarget(
        platform=item.platform,
        chat_id=item.chat_id,
        thread_id=None if thread is None else str(thread),
        reply_to_message_id=quoted,
    )


def without_quote(target: OutboundTarget) -> OutboundTarget:
    """The same place, not quoting a message (notices are not answers)."""
    return OutboundTarget(target.platform, target.chat_id, target.thread_id, None)


def is_final_reply(message: ChatMessage) -> bool:
    """An assistant message that answers the user (text, no tool call)."""
    return (
        message.role == "assistant"
        and message.kind == "message"
        and not message.tool_use_ids()
        and bool(message.text.strip())
    )


class Replies:
    """Writes replies and notices to the outbox and wakes delivery."""

    def __init__(self, store: Store, delivery: Delivery) -> None:
        self._store = store
        self._delivery = delivery

    async def reply(
        self,
        session_id: str,
        pending: Sequence[PendingItem],
        target: OutboundTarget,
        text: str,
        message_id: int | None,
        *,
        status: Literal["done", "failed"] = "done",
        error: str | None = None,
    ) -> None:
        """Answer ``pending``: the outbox row first, then the items are done, then delivery wakes."""
        await self._store.outbox_put(
            session_id=session_id,
            target=target_to_dict(target),
            text=text,
            inbox_ids=[p.item.id for p in pending],
            message_id=message_id,
        )
        for p in pending:
            await self._store.inbox_mark([p.item.id], status, error=error, message_id=p.message.id)
        self._delivery.notify()

    async def answer_command(self, session_id: str, item: InboxRecord, text: str) -> None:
        """A command's answer: it is not part of the conversation, only of the outbox."""
        await self._store.outbox_put(
            session_id=session_id,
            target=target_to_dict(reply_target(item)),
            text=text,
            inbox_ids=[item.id],
            message_id=None,
        )
        await self._store.inbox_mark([item.id], "done")
        self._delivery.notify()

    async def notice(self, session_id: str, target: OutboundTarget, text: str) -> None:
        """A one-line notice to the chat (not an answer to any item)."""
        await self._store.outbox_put(
            session_id=session_id, target=target_to_dict(target), text=text, inbox_ids=[], message_id=None
        )
        self._delivery.notify()

    async def keep_typing(self, target: OutboundTarget) -> None:
        """Refresh the typing indicator until cancelled."""
        while True:
            await self._delivery.typing(target)
            await asyncio.sleep(TYPING_EVERY_SECONDS)
