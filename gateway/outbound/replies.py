"""Replies on their way out: the outbox row first, then the inbox items it answers, then delivery.

The order is what makes replies exactly-once: an inbox item is marked done only after its
reply is in the outbox, so a crash in between re-serves the item and finds the reply.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

from agent.loop_turn import TurnResult
from agent.types import ChatMessage
from gateway.outbound.delivery import Delivery, target_to_dict
from gateway.platforms.base import OutboundTarget
from gateway.store.records import StreamRecord
from gateway.store.repository import Store

_log = logging.getLogger(__name__)

TYPING_EVERY_SECONDS = 4.0
EMPTY_REPLY = "(I have nothing to add.)"
# What a turn the model declined shows (its partial text, if any, is stored but not shown).
REFUSAL_LINE = (
    "The model declined to answer that. You can rephrase it, or start a fresh conversation with /new."
)
_PART_MARK = re.compile(r"^\(\d+/\d+\)\s*")


class Answerable(Protocol):
    """What an answer needs of the inbox item it answers (serving's ``InboxItem``)."""

    @property
    def id(self) -> int: ...

    @property
    def session_key(self) -> str: ...

    @property
    def reply_target(self) -> OutboundTarget: ...


ItemT = TypeVar("ItemT", bound=Answerable)


@dataclass(frozen=True, slots=True)
class PendingItem(Generic[ItemT]):
    """An addressed inbox item already appended to the conversation as ``message``."""

    item: ItemT
    message: ChatMessage


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


def shows_reply(stream: StreamRecord, text: str) -> bool:
    """The stream's messages already show (the start of) ``text``: a re-delivery edits them."""
    first = _PART_MARK.sub("", stream.shown[0]).strip() if stream.shown else ""
    return bool(first) and bool(stream.message_ids) and text.strip().startswith(first[:40])


def reply_of(result: TurnResult) -> tuple[str, int | None]:
    """The text and stored message id of a turn's final answer."""
    if result.stopped == "refusal":
        return REFUSAL_LINE, None
    final = next((m for m in reversed(result.messages) if is_final_reply(m)), None)
    text = result.final_text.strip() or EMPTY_REPLY
    return text, (final.id if final is not None else None)


class Replies:
    """Writes replies and notices to the outbox and wakes delivery."""

    def __init__(self, store: Store, delivery: Delivery) -> None:
        self._store = store
        self._delivery = delivery

    async def reply(
        self,
        session_id: str,
        pending: Sequence[PendingItem[ItemT]],
        target: OutboundTarget,
        text: str,
        message_id: int | None,
        *,
        status: Literal["done", "failed"] = "done",
        error: str | None = None,
        stream: StreamRecord | None = None,
    ) -> None:
        """Answer ``pending``: the outbox row and the items done in one transaction; delivery wakes.
        ``stream``: an orphaned stream already showing this reply, whose messages delivery edits."""
        await self._store.outbox_put(
            session_id=session_id,
            target=target_to_dict(target),
            text=text,
            inbox_ids=[p.item.id for p in pending],
            message_id=message_id,
            answers=[(p.item.id, p.message.id) for p in pending],
            status=status,
            error=error,
            stream_id=None if stream is None else stream.id,
        )
        self._delivery.notify()

    async def unanswered(
        self,
        session_id: str,
        addressed: list[PendingItem[ItemT]],
        orphans: Sequence[StreamRecord] = (),
    ) -> list[PendingItem[ItemT]]:
        """``addressed`` less the items already answered (after a crash): by an outbox row, or by a final
        assistant message in the conversation (whose reply is queued now). A queued reply that one
        of ``orphans`` (streams the worker taken over from left open) already shows takes that
        stream along: delivery edits its messages instead of sending the reply again."""
        pending: list[PendingItem[ItemT]] = []
        for p in addressed:
            if await self._store.outbox_for_inbox(p.item.id) is not None:
                await self._store.inbox_mark([p.item.id], "done", message_id=p.message.id)
            else:
                pending.append(p)
        if not pending:
            return []
        by_message = {p.message.id: p for p in pending}
        first_seq = min(p.message.seq or 0 for p in pending)
        waiting: list[PendingItem[ItemT]] = []
        answered: list[tuple[list[PendingItem[ItemT]], ChatMessage]] = []
        for row in await self._store.messages_after(session_id, first_seq - 1):
            if row.id in by_message:
                waiting.append(by_message[row.id])
            elif waiting and is_final_reply(row):
                answered.append((waiting, row))
                waiting = []
        done: set[int] = set()
        for group, reply in answered:
            _log.info("reply found in the conversation; queueing it", extra={"session": session_id})
            shown = next((s for s in reversed(orphans) if shows_reply(s, reply.text)), None)
            await self.reply(
                session_id, group, group[-1].item.reply_target, reply.text, reply.id, stream=shown
            )
            done.update(p.item.id for p in group)
        return [p for p in pending if p.item.id not in done]

    async def answer_command(self, session_id: str, item: Answerable, text: str) -> None:
        """A command's answer: it is not part of the conversation, only of the outbox."""
        await self._store.outbox_put(
            session_id=session_id,
            target=target_to_dict(item.reply_target),
            text=text,
            inbox_ids=[item.id],
            message_id=None,
            answers=[(item.id, None)],
        )
        self._delivery.notify()

    async def relay(self, session_id: str, items: Sequence[Answerable], text: str) -> None:
        """Webhook deliveries relayed as one plain message (no model call): like a command's answer,
        in the outbox only, and the items done in the same transaction."""
        await self._store.outbox_put(
            session_id=session_id,
            target=target_to_dict(items[-1].reply_target),
            text=text,
            inbox_ids=[item.id for item in items],
            message_id=None,
            answers=[(item.id, None) for item in items],
        )
        self._delivery.notify()

    async def notice(self, session_id: str, target: OutboundTarget, text: str) -> None:
        """A one-line notice to the chat (not an answer to any item)."""
        await self._store.outbox_put(
            session_id=session_id,
            target=target_to_dict(target),
            text=text,
            inbox_ids=[],
            message_id=None,
            kind="notice",
        )
        self._delivery.notify()

    async def set_aside(self, item: Answerable, text: str) -> None:
        """Tell the sender once that their message was given up on (it stays failed in the inbox)."""
        current = await self._store.current_session(item.session_key)
        await self._store.outbox_put(
            session_id=current.id if current is not None else None,
            target=target_to_dict(item.reply_target),
            text=text,
            inbox_ids=[item.id],
            message_id=None,
            kind="failure_notice",
        )
        self._delivery.notify()

    async def keep_typing(self, target: OutboundTarget) -> None:
        """Refresh the typing indicator until cancelled."""
        while True:
            await self._delivery.typing(target)
            await asyncio.sleep(TYPING_EVERY_SECONDS)
