"""One turn of a session: its claimed messages into the conversation, hygiene, the agent, the reply.

The gateway's hot path, kept to a few transactions: the messages are appended, the
session touched and its active view and compression state read in ONE transaction
(:meth:`gateway.store.turn_ops.TurnOps.append_turn`, the view from memory while it is current);
hygiene and the agent get that view and state instead of reading them again; and the check for
a reply that already exists (after a crash) runs only for messages that were stored before —
a message appended just now cannot have been answered.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass, field
from typing import Any

from agent.clock import Clock
from agent.compaction import WhenSlow
from agent.context_engine import ContextEngine
from agent.errors import LLMError, StoreError
from agent.loop import AgentLoop
from agent.loop_turn import TurnResult
from agent.types import AgentSession, ChatMessage
from gateway.config import Settings
from gateway.outbound.failures import GAVE_UP, classify
from gateway.outbound.replies import PendingItem, Replies, reply_of, without_quote
from gateway.outbound.streaming import INTERRUPTED_NOTE, STOPPED_NOTE, Streams
from gateway.platforms.base import OutboundTarget
from gateway.serving.auth import Authorizer
from gateway.serving.compaction_notices import compaction_notices, notice_mode
from gateway.serving.hygiene import HygieneReport, run_hygiene
from gateway.serving.inbound import InboxItem, truncation_note, user_message
from gateway.serving.media_loader import MediaLoader, media_notice
from gateway.serving.overrides import chat_notice_mode
from gateway.serving.retry import RetryPolicy
from gateway.serving.sessions import SessionDirectory
from gateway.serving.tool_view import tool_scope
from gateway.store.fence import LeaseLost
from gateway.store.records import SessionInfo
from gateway.store.repository import Store
from gateway.store.turn_ops import AppendedTurn

_log = logging.getLogger(__name__)


class Outcome(enum.Enum):
    DONE = "done"
    REQUEUE = "requeue"  # interrupted: serve these again now, with whatever arrived
    RETRY_LATER = "retry_later"  # the model is unavailable: try again after a delay


CANCEL_REASONS = frozenset({"stop", "new", "end", "interrupt"})
"""Why a running turn may be cancelled: ``/stop``, ``/new``, an admin ending the session, or a new
message (``sessions.busy_mode: interrupt``, the only one whose items are served again)."""


@dataclass
class TurnBook:
    """What the gateway knows of each session's turns between its workers' runs."""

    running: dict[str, asyncio.Task[TurnResult]] = field(default_factory=dict)
    cancel_reason: dict[str, str] = field(default_factory=dict)
    stopped: set[str] = field(default_factory=set)
    retries: dict[str, int] = field(default_factory=dict)

    def cancel(self, key: str, reason: str) -> None:
        task = self.running.get(key)
        if task is not None and not task.done():
            self.cancel_reason[key] = reason
            task.cancel()


@dataclass
class _Batch:
    """Messages built from claimed items, waiting to be appended together."""

    items: list[InboxItem] = field(default_factory=list)
    messages: list[ChatMessage] = field(default_factory=list)
    unreadable: list[list[str]] = field(default_factory=list)


class TurnServer:
    """Serves a run of ordinary (non-command) inbox items of one session as one turn."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        agent: AgentLoop,
        engine: ContextEngine,
        replies: Replies,
        streams: Streams,
        media: MediaLoader,
        directory: SessionDirectory,
        tools: list[dict[str, Any]],
        retry: RetryPolicy,
        clock: Clock,
        book: TurnBook,
    ) -> None:
        self._settings = settings
        self._store = store
        self._agent = agent
        self._engine = engine
        self._replies = replies
        self._streams = streams
        self._media = media
        self._directory = directory
        self._tools = tools
        self._auth = Authorizer(settings)
        self._retry = retry
        self._clock = clock
        self._book = book

    def prebuild(self, items: list[InboxItem], info: SessionInfo | None) -> list[ChatMessage] | None:
        """The messages of ``items`` when they are plain (no edit, attachment or command, none out
        of attempts, no reset due), so the claim can append them in its own transaction; else None.
        ``info`` None: the session is about to be opened (no reset can be due)."""
        try:
            return self._plain(items, info)
        except Exception:  # an unreadable item: the general path isolates it (gateway.serving.dead_letters)
            return None

    def _plain(self, items: list[InboxItem], info: SessionInfo | None) -> list[ChatMessage] | None:
        if info is not None and self._directory.reset_due(info):
            return None
        messages: list[ChatMessage] = []
        for item in items:
            if item.attempts > self._settings.delivery.inbox_max_attempts:
                return None  # to be set aside (gateway.serving.dead_letters), not appended
            if item.edit_of is not None or item.payload["attachments"] or item.command is not None:
                return None
            if item.deliver_only:
                return None  # relayed, not a turn (Gateway._serve)
            messages.append(user_message(item))
        return messages

    async def serve(
        self,
        key: str,
        items: list[InboxItem],
        current: SessionInfo | None = None,
        appended: AppendedTurn | None = None,
    ) -> Outcome:
        """Serve ``items`` as one turn. ``current``: the key's session when the caller has just read
        it; ``appended``: the items' messages when the claim has already appended them (prebuild)."""
        first_try = self._book.retries.get(key, 0) == 0
        done: list[tuple[int, int | None]] = []
        addressed: list[tuple[PendingItem[InboxItem], bool]] = []
        if appended is not None and current is not None:
            info = current
            session = self._directory.agent_session(current)
            await self._sort_out(session, items, [[] for _ in items], appended, first_try, done, addressed)
        else:
            info = await self._directory.current(key, items[0], known=current)
            session = self._directory.agent_session(info)
            appended = await self._append_all(session, items, first_try, done, addressed)
        if done:
            await self._store.inbox_done(done)
        if not addressed:
            return Outcome.DONE
        fresh = [p for p, created in addressed if created]
        # Only a message stored before (a re-served item) can have been answered already, and
        # only then can a worker this one took the chat over from have left a stream open.
        known = [p for p, created in addressed if not created]
        pending = fresh + (await self._take_over(key, session.id, known) if known else [])
        if not pending:
            return Outcome.DONE
        pending.sort(key=lambda p: p.item.id)
        target = pending[-1].item.reply_target
        for p in pending:
            truncated_from = p.item.payload["truncated_from"]
            if truncated_from and first_try:
                kept = len(p.item.text)
                await self._replies.notice(
                    session.id, without_quote(target), truncation_note(kept, truncated_from)
                )
        return await self._answer(key, session, pending, target, appended, info)

    async def _take_over(
        self, key: str, session_id: str, known: list[PendingItem[InboxItem]]
    ) -> list[PendingItem[InboxItem]]:
        """Re-served items: finish what the worker before left. A reply it had written is queued
        (editing its stream's messages when they show it); its other open streams get the
        restart's "(interrupted …)" note; the items still unanswered are returned."""
        orphans = await self._streams.orphans(key)
        unanswered = await self._replies.unanswered(session_id, known, orphans)
        adopted = {row.id for row in await self._store.streams_adopted([o.id for o in orphans])}
        for stream in orphans:
            if stream.id not in adopted:
                await self._streams.interrupt(stream)
        return unanswered

    async def _append_all(
        self,
        session: AgentSession,
        items: list[InboxItem],
        first_try: bool,
        done: list[tuple[int, int | None]],
        addressed: list[tuple[PendingItem[InboxItem], bool]],
    ) -> AppendedTurn | None:
        """Edits applied and messages appended in order; the view after the last append (None when
        an edit came after it, or nothing was appended)."""
        batch = _Batch()
        appended: AppendedTurn | None = None
        for item in items:
            if item.edit_of is not None:
                # In order: an edit of a message claimed in this very batch must find it stored.
                appended = await self._append(session, batch, first_try, done, addressed) or appended
                batch = _Batch()
                if await self._applied_edit(session.id, item):
                    appended = None  # the view read with those appends predates the edit
                    continue
            message, unreadable = await self._media.message_for(session, item)
            batch.items.append(item)
            batch.messages.append(message)
            batch.unreadable.append(unreadable)
        appended = await self._append(session, batch, first_try, done, addressed) or appended
        if appended is None:
            await self._store.touch_session(session.id, self._clock())
        return appended

    async def _append(
        self,
        session: AgentSession,
        batch: _Batch,
        first_try: bool,
        done: list[tuple[int, int | None]],
        addressed: list[tuple[PendingItem[InboxItem], bool]],
    ) -> AppendedTurn | None:
        if not batch.items:
            return None
        turn = await self._store.append_turn(session.id, batch.messages, at=self._clock())
        await self._sort_out(session, batch.items, batch.unreadable, turn, first_try, done, addressed)
        return turn

    async def _sort_out(
        self,
        session: AgentSession,
        items: list[InboxItem],
        unreadables: list[list[str]],
        turn: AppendedTurn,
        first_try: bool,
        done: list[tuple[int, int | None]],
        addressed: list[tuple[PendingItem[InboxItem], bool]],
    ) -> None:
        """Appended items: ambient ones are done, addressed ones wait for the answer."""
        for item, unreadable, (message, created) in zip(items, unreadables, turn.stored, strict=True):
            if unreadable and item.addressed and first_try:
                await self._replies.notice(
                    session.id, without_quote(item.reply_target), media_notice(unreadable)
                )
            if item.addressed:
                addressed.append((PendingItem(item, message), created))
            else:
                done.append((item.id, message.id))

    async def _applied_edit(self, session_id: str, item: InboxItem) -> bool:
        """An edit updates the stored message in place and is not answered again.

        An edit of a message we never stored (sent before the bot joined, say) is taken as
        a new message instead.
        """
        original = item.edit_of
        if original is None:
            return False
        if item.command is not None:
            await self._store.inbox_mark([item.id], "ignored", error="an edited command is not run again")
            return True
        edited = user_message(item)
        stored = await self._store.record_edit(
            session_id, original, edited.content, at=edited.created_at or self._clock()
        )
        if stored is None:
            return False
        await self._store.inbox_mark([item.id], "done", message_id=stored.id)
        return True

    async def _hygiene(
        self,
        session: AgentSession,
        target: OutboundTarget,
        when_slow: WhenSlow,
        appended: AppendedTurn | None,
    ) -> HygieneReport:
        report = await run_hygiene(
            self._engine,
            self._store,
            session,
            self._settings.compression,
            messages=None if appended is None else appended.view,
            state=None if appended is None else appended.state,
            tools=self._tools,
            when_slow=when_slow,
        )
        notice = report.notice() if self._settings.sessions.hygiene_notice else None
        if notice:
            await self._replies.notice(session.id, without_quote(target), notice)
        return report

    async def _answer(
        self,
        key: str,
        session: AgentSession,
        pending: list[PendingItem[InboxItem]],
        target: OutboundTarget,
        appended: AppendedTurn | None,
        info: SessionInfo,
    ) -> Outcome:
        # Typing from before hygiene: a compaction can take a while, the user should see life.
        typing = asyncio.create_task(self._replies.keep_typing(target))
        when_slow = self._summarizing_notice(session.id, target)
        try:
            report = await self._hygiene(session, target, when_slow, appended)
        except BaseException:
            typing.cancel()
            raise
        live = self._streams.open(session.id, target)
        turn: asyncio.Task[TurnResult] = asyncio.create_task(
            self._agent.run_turn(
                session,
                history=report.messages,
                state=report.state,
                when_slow=when_slow,
                listener=live,
                tool_scope=tool_scope(self._auth, pending[-1].item.user_id, target, info),
            )
        )
        self._book.running[key] = turn
        try:
            await asyncio.wait({turn})
        except asyncio.CancelledError:
            turn.cancel()
            if live is not None:
                live.detach()  # its stream stays open: the next start marks it interrupted
            raise
        finally:
            self._book.running.pop(key, None)
            typing.cancel()
        if turn.cancelled():
            if live is not None:
                stopped = self._book.cancel_reason.get(key, "stop") != "interrupt"
                await live.abandon(STOPPED_NOTE if stopped else INTERRUPTED_NOTE)
            return await self._interrupted(key, session, pending)
        exc = turn.exception()
        if exc is None:
            self._book.retries.pop(key, None)
            text, message_id = reply_of(turn.result())
            if live is None or not await self._streams.deliver(live, pending, text, message_id):
                await self._replies.reply(session.id, pending, target, text, message_id)
            return Outcome.DONE
        if isinstance(exc, LeaseLost):
            if live is not None:
                live.detach()  # its stream is the new owner's to finish
            raise exc  # another worker owns the session now: say nothing, write nothing
        if live is not None:
            await live.abandon(INTERRUPTED_NOTE)
        return await self._failed(key, session, pending, target, exc)

    def _summarizing_notice(self, session_id: str, target: OutboundTarget) -> WhenSlow:
        """What the chat is told about the compactions of this turn (sessions.compaction_notice)."""
        place = without_quote(target)

        async def say(text: str) -> None:
            await self._replies.notice(session_id, place, text)

        chat = chat_notice_mode(self._settings, target.platform, target.chat_id, target.thread_id)
        mode = notice_mode(self._settings, target.platform, chat)
        return compaction_notices(mode, say, self._settings.sessions.summarizing_notice_seconds)

    async def _interrupted(
        self, key: str, session: AgentSession, pending: list[PendingItem[InboxItem]]
    ) -> Outcome:
        reason = self._book.cancel_reason.pop(key, "stop")
        if reason == "interrupt":
            _log.info("turn interrupted by a new message", extra={"session": session.id})
            return Outcome.REQUEUE
        if reason == "stop":
            self._book.stopped.add(key)  # the /stop item, served next, answers "Stopped."
        # ``new`` (its item, served next, starts the new conversation) or an admin's ``end``: the
        # conversation this turn answered is over, so its answer is dropped like a stopped one.
        await self._store.inbox_done([(p.item.id, p.message.id) for p in pending])
        _log.info("turn stopped (%s)", reason, extra={"session": session.id})
        return Outcome.DONE

    async def _failed(
        self,
        key: str,
        session: AgentSession,
        pending: list[PendingItem[InboxItem]],
        target: OutboundTarget,
        exc: BaseException,
    ) -> Outcome:
        fields = {"session": session.id, "error": type(exc).__name__}
        if isinstance(exc, StoreError):
            raise exc  # the worker keeps the items and comes back later
        failure = classify(exc)
        text = failure.text
        if failure.retry:
            attempt = self._book.retries.get(key, 0) + 1
            self._book.retries[key] = attempt
            if self._retry.retries_model(attempt):
                _log.warning("model unavailable (attempt %d); will retry: %s", attempt, exc, extra=fields)
                if attempt == 1:
                    await self._replies.notice(session.id, without_quote(target), failure.text)
                return Outcome.RETRY_LATER
            self._book.retries.pop(key, None)
            text = GAVE_UP
        if isinstance(exc, LLMError):
            _log.error("turn failed: %s", exc, extra=fields)
        else:
            _log.error("turn failed", exc_info=exc, extra=fields)
        await self._replies.reply(
            session.id, pending, target, text, None, status="failed", error=type(exc).__name__
        )
        return Outcome.DONE
