"""Streamed replies: the model's text shown while it is written, by editing the reply in place.

A :class:`LiveReply` is the :class:`agent.llm_stream.TurnListener` of one turn. The loop
reports text deltas, new calls and tool rounds; the live reply keeps only the current
display (the current call's text, or a short status line during a tool round) and a task of
its own shows it: the first text as a new message (quoting the question), then edits at most
once per ``edit_interval_seconds`` per chat. A display longer than the platform's limit is
cut with the shared splitter (never inside a code fence or a UTF-16 pair) and continues in
new messages.

Drafts. Where the adapter shows drafts (Telegram private chats), the newest part is a draft
instead of a message: no id, nothing to edit, sent again at least every
``adapter.draft_refresh_seconds`` because it lapses on its own; the final pass sends it as a
message. A draft the platform refuses turns this reply (and, in the adapter, that chat) to edits.

Durability. Before the first message is posted, a ``streams`` row is opened; after every
flush it records each message's id and text. When the turn ends, the messages are edited to
exactly the final reply, and in ONE transaction the reply becomes an outbox row already
``sent`` whose ``delivered_ids`` are the streamed messages (so delivery never sends it again)
and the stream is closed; then the inbox items are marked done, as for any reply. A stream
still open on start was cut short by a crash: its last message is edited to say so, and the
turn, still pending in the inbox, is answered once more. When streaming fails (the platform
refuses an edit, say) the reply falls back to the outbox as before.

Takeovers. A stream belongs to the session lease it was opened under. A worker that takes a chat
over (its claim on the chat lapsed: the worker died or froze) finds that chat's orphaned streams:
one that already shows the reply the conversation holds is adopted by the re-delivered outbox row,
whose delivery edits those messages instead of sending new ones; any other gets the restart's
"(interrupted …)" note. A worker starting touches only streams whose lease has lapsed, never
another worker's live reply. A live reply asks the fence before each edit, so a worker woken past
its lease does not overwrite what the new owner wrote; and its first message waits until no
earlier reply of the chat is still pending in the outbox, so a chat's replies go out in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

from agent.llm_stream import tool_status
from gateway.config import DeliverySettings
from gateway.errors import AdapterError, DraftRefused
from gateway.outbound.delivery import SURPLUS, target_from_dict, target_to_dict
from gateway.outbound.replies import PendingItem
from gateway.platforms.base import OutboundTarget, PlatformAdapter
from gateway.splitter import split_message
from gateway.store import fence
from gateway.store.records import StreamRecord
from gateway.store.repository import Store

_log = logging.getLogger(__name__)

STOPPED_NOTE = "(stopped)"
INTERRUPTED_NOTE = "(interrupted — this answer did not finish)"
RESTART_NOTE = "(interrupted by a restart — the answer follows in a new message)"
SURPLUS_TEXT = SURPLUS
STOP_WAIT_SECONDS = 30.0
ORDER_WAIT_SECONDS = 60.0
"""A reply waits at most this long for an earlier reply of its chat to leave the outbox (one that
cannot be delivered, say to a platform no worker runs, must not hold the chat forever)."""
ORDER_POLL_SECONDS = 0.2


class EditPacer:
    """At most one flush per ``interval`` seconds per chat, shared by every stream in that chat."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._last: dict[tuple[str, str], float] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def lock(self, target: OutboundTarget) -> asyncio.Lock:
        return self._locks.setdefault((target.platform, target.chat_id), asyncio.Lock())

    async def wait_turn(self, target: OutboundTarget, interval: float | None = None) -> None:
        """Sleep until this chat may be edited again (call with :meth:`lock` held), then take the slot;
        ``interval`` is the platform's own, when it has one."""
        key = (target.platform, target.chat_id)
        last = self._last.get(key)
        if last is not None:
            delay = last + (self.interval if interval is None else interval) - self._clock()
            if delay > 0:
                await asyncio.sleep(delay)
        self._last[key] = self._clock()


class LiveReply:
    """One turn's reply as it is written; see the module docstring."""

    def __init__(
        self,
        adapter: PlatformAdapter,
        store: Store,
        session_id: str,
        target: OutboundTarget,
        pacer: EditPacer,
    ) -> None:
        self._adapter = adapter
        self._store = store
        self._session_id = session_id
        self._target = target
        self._pacer = pacer
        self._text = ""
        self._status: str | None = None
        self._changed = asyncio.Event()
        self.ids: list[str] = []
        self._shown: list[str] = []
        self.stream_id: int | None = None
        self.flushes = 0
        self._broken = False
        self._closing = False
        self._drafting = adapter.drafts(target)
        self._drafted = False  # a draft was shown (it is no message: ``ids`` does not list it)
        self._draft_id = secrets.randbelow(2**31 - 1) + 1  # non-zero; one per reply, so its drafts animate
        self._task = asyncio.create_task(self._run(), name=f"live reply {session_id}")

    # the turn's listener (synchronous, never blocking) -------------------------------------
    def call_started(self) -> None:
        self._text = ""

    def text(self, delta: str) -> None:
        self._text += delta
        if self._text.strip():
            self._status = None
            self._changed.set()

    def tool_started(self, name: str) -> None:
        self._status = tool_status(name)
        self._changed.set()

    @property
    def display(self) -> str:
        return f"⏳ {self._status}" if self._status is not None else self._text

    # showing it ----------------------------------------------------------------------------
    async def _run(self) -> None:
        while not self._broken and not self._closing:
            if self._drafting and self._drafted:
                # A draft lapses unless sent again: show it anew when nothing changed for a while.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), self._adapter.draft_refresh_seconds)
            else:
                await self._changed.wait()
            if self._closing:
                return
            async with self._pacer.lock(self._target):
                await self._pacer.wait_turn(self._target, self._adapter.edit_interval_seconds)
                self._changed.clear()
                try:
                    await self._show(self.display)
                except fence.LeaseLost:
                    # Woken past the lease: the chat is another worker's now, and so is this stream.
                    self._broken = True
                    return

    async def _show(self, text: str, *, final: bool = False) -> None:
        """Make the messages show ``text``. While the reply grows only the newest message is edited
        (and new ones posted): earlier ones change only by their "(1/n)" numbering, which the
        ``final`` pass sets right, so one flush is one edit however long the reply. With drafts the
        newest part is a draft until the ``final`` pass sends it."""
        if not text.strip() or self._broken:
            return
        parts = split_message(text, self._adapter.text_limit, measure=self._adapter.measure)
        if self.stream_id is None:
            await self._after_earlier_replies()
        else:
            await self._store.stream_fence_check()
        try:
            for index, part in enumerate(parts):
                if self._drafting and not final and index == len(parts) - 1:
                    try:
                        await self._adapter.draft(self._target, self._draft_id, part)
                        self._drafted = True
                        continue
                    except DraftRefused as exc:
                        _log.info("drafts refused; this reply is edited in place instead: %s", exc)
                        self._drafting = False
                await self._place(index, part, len(parts), final=final)
        except AdapterError as exc:
            _log.warning("streaming a reply failed; it goes out as a whole instead: %s", exc)
            self._broken = True
        self.flushes += 1
        if self.stream_id is not None:
            await self._store.stream_update(self.stream_id, message_ids=self.ids, shown=self._shown)

    async def _after_earlier_replies(self) -> None:
        """Before the first message: wait until no earlier reply of this chat is still pending in
        the outbox (a reply another worker re-delivers after a takeover, say)."""
        deadline = time.monotonic() + ORDER_WAIT_SECONDS
        while await self._store.outbox_chat_pending(target_to_dict(self._target)):
            if time.monotonic() > deadline:
                _log.warning("an earlier reply of this chat is still pending; this one goes ahead")
                return
            await asyncio.sleep(ORDER_POLL_SECONDS)

    async def _place(self, index: int, part: str, count: int, *, final: bool) -> None:
        """Part ``index`` of ``count`` as a message: edited if already posted (and changed), else posted."""
        if index < len(self.ids):
            settled = index < len(self.ids) - 1 and index < count - 1
            if self._shown[index] != part and (final or not settled):
                await self._adapter.edit(self._target, self.ids[index], part)
                self._shown[index] = part
            return
        if self.stream_id is None:
            self.stream_id = await self._store.stream_open(
                session_id=self._session_id, target=target_to_dict(self._target)
            )
        where = self._target if index == 0 else self._adapter.continuation(self._target)
        self.ids.append(await self._adapter.stream_send(where, part))
        self._shown.append(part)

    def detach(self) -> None:
        """Stop showing (the service is stopping); the open stream is left for the next start."""
        self._task.cancel()

    async def _stop_task(self) -> None:
        """Let a flush in flight finish (a send cut off midway could leave a message we never
        recorded), then stop showing."""
        self._closing = True
        self._changed.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), STOP_WAIT_SECONDS)
        except TimeoutError:
            self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def finish(self, text: str) -> list[str] | None:
        """Show exactly ``text`` (the stored reply); the message ids, or None when streaming failed."""
        await self._stop_task()
        if not self._broken:
            async with self._pacer.lock(self._target):
                await self._pacer.wait_turn(self._target, self._adapter.edit_interval_seconds)
                await self._show(text, final=True)
        if self._broken:
            await self._close()
            return None
        parts = len(split_message(text, self._adapter.text_limit, measure=self._adapter.measure))
        for index in range(parts, len(self.ids)):  # a longer earlier display left messages over
            with contextlib.suppress(AdapterError):
                await self._adapter.edit(self._target, self.ids[index], SURPLUS_TEXT)
        await self._end()
        return self.ids[:parts]

    async def abandon(self, note: str) -> None:
        """The turn ended without a reply (stopped, failed): the partial message says so."""
        await self._stop_task()
        if (self.ids or self._drafted) and not self._broken:
            # What the model had written by then (more than the last edit showed), then the note.
            async with self._pacer.lock(self._target):
                await self._pacer.wait_turn(self._target, self._adapter.edit_interval_seconds)
                await self._show(f"{self.display.rstrip()}\n\n{note}", final=True)
        await self._close()
        await self._end()

    async def _close(self) -> None:
        if self.stream_id is not None:
            await self._store.stream_close(self.stream_id)

    async def _end(self) -> None:
        with contextlib.suppress(AdapterError):
            await self._adapter.stream_end(self._target)


def with_note(shown: str, note: str, adapter: PlatformAdapter) -> str:
    """``shown`` with ``note`` appended, shortened so that it still fits the platform's limit."""
    text = f"{shown}\n\n{note}"
    while adapter.measure(text) > adapter.text_limit and shown:
        shown = shown[: max(0, len(shown) - max(1, len(text) - adapter.text_limit) - 1)]
        text = f"{shown}…\n\n{note}"
    return text


class Streams:
    """Opens live replies for the platforms that can show them, and finishes them durably."""

    def __init__(
        self,
        store: Store,
        adapter_for: Callable[[str], PlatformAdapter | None],
        settings: DeliverySettings,
    ) -> None:
        self._store = store
        self._adapter_for = adapter_for
        self._settings = settings
        self._pacer = EditPacer(settings.edit_interval_seconds)

    def open(self, session_id: str, target: OutboundTarget) -> LiveReply | None:
        """A live reply for ``target``, or None when this reply is not streamed."""
        adapter = self._adapter_for(target.platform)
        if not self._settings.streaming or adapter is None or not adapter.streams_to(target):
            return None
        return LiveReply(adapter, self._store, session_id, target, self._pacer)

    async def deliver(
        self, live: LiveReply, pending: Sequence[PendingItem[Any]], text: str, message_id: int | None
    ) -> bool:
        """Finish ``live`` as the answer to ``pending``; False when the outbox must send it instead."""
        ids = await live.finish(text)
        if ids is None:
            return False
        if live.stream_id is None:  # nothing was shown: cannot happen after a successful finish
            return False
        await self._store.stream_deliver(
            live.stream_id,
            text=text,
            message_ids=ids,
            inbox_ids=[p.item.id for p in pending],
            message_id=message_id,
        )
        for p in pending:
            await self._store.inbox_mark([p.item.id], "done", message_id=p.message.id)
        return True

    async def recover(self, worker: str) -> int:
        """On start: tell the streams whose session lease has lapsed (a crash cut them short) that
        they were interrupted; returns how many were closed. Another worker's live reply is left
        alone; one SQLite process has no other live worker, so there every stream but
        ``worker``'s own is an orphan. A stream whose chat still has messages to serve is left to
        the worker that takes the chat over (it may adopt it for the reply it re-delivers)."""
        lapsed = self._store.db.dialect != "sqlite"
        closed = 0
        found = await self._store.streams_orphaned(worker=worker, only_lapsed=lapsed, settled_only=True)
        for stream in found:
            closed += await self.interrupt(stream)
        if closed:
            _log.info("%d reply stream(s) cut short by a restart marked as interrupted", closed)
        return closed

    async def orphans(self, key: str) -> list[StreamRecord]:
        """The chat's streams whose session lease lapsed (the worker this one takes over from)."""
        held = fence.current()
        worker = "" if held is None else held.worker
        return await self._store.streams_orphaned(worker=worker, session_key=key)

    async def interrupt(self, stream: StreamRecord) -> int:
        """End an orphaned partial with the restart's note and close its stream; 0 when this worker
        does not run its platform (another one will)."""
        target = target_from_dict(stream.target)
        adapter = self._adapter_for(target.platform)
        if adapter is None:
            return 0
        if stream.message_ids and stream.shown:
            try:
                note = with_note(stream.shown[-1], RESTART_NOTE, adapter)
                await adapter.edit(target, stream.message_ids[-1], note)
            except AdapterError as exc:
                _log.warning("could not mark an interrupted reply: %s", exc)
        await self._store.stream_close(stream.id)
        return 1
