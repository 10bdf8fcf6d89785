"""The Gateway: durable intake, one turn at a time per session, busy mode, exactly-once replies.

Intake (the adapters' :data:`InboundHandler`) checks authorization, cleans the text, commits
the message to the inbox and schedules the session; the adapter acknowledges after that.
A per-session worker then claims the session's pending items, appends them to the
conversation, runs hygiene and the agent turn, and queues the reply in the outbox.

Exactly-once: an item is marked done only once its reply is in the outbox. Re-serving an
item (after a crash or a restart) appends it once (idempotent on its platform message id)
and does not answer it again when an outbox row or a final assistant message already
answers it. Messages arriving during a turn wait for the next turn (``queue``) or cancel
the running one so that one new turn sees them all (``interrupt``).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from agent.compaction import WhenSlow
from agent.context_engine import ContextEngine
from agent.errors import LLMError, StoreError
from agent.loop import AgentLoop, TurnResult
from agent.types import AgentSession, ChatMessage
from gateway.auth import REFUSAL_TEXT, Authorizer
from gateway.commands import IMMEDIATE, Command, CommandContext, parse_command, run_command
from gateway.config import Settings
from gateway.dead_letters import InboxFailures
from gateway.delivery import Delivery
from gateway.failures import GAVE_UP, classify
from gateway.hygiene import SUMMARIZING_NOTICE, run_hygiene
from gateway.inbound import (
    clean_text,
    edit_of,
    inbox_message_id,
    inbox_payload,
    payload_text,
    truncation_note,
    user_message,
)
from gateway.media_loader import MediaLoader, media_notice
from gateway.platforms.base import InboundMessage, OutboundTarget
from gateway.replies import PendingItem, Replies, reply_of, reply_target, without_quote
from gateway.sessions import SessionDirectory, SessionLocks, session_key
from gateway.store.records import InboxRecord, SessionInfo
from gateway.store.repository import Store
from gateway.streaming import INTERRUPTED_NOTE, STOPPED_NOTE, Streams
from gateway.tasks import TaskBook

_log = logging.getLogger(__name__)

LEASE_SECONDS = 300.0
RETRY_DELAYS = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0)
WORKER_ERROR_DELAY = 5.0
CLAIM_BATCH = 50
SWEEP_MAX_SECONDS = 60.0
AMBIENT_GATHER_SECONDS = 0.2


def utcnow() -> datetime:
    return datetime.now(UTC)


def default_worker_id() -> str:
    # Unique per Gateway, not per process: stop() hands back exactly this gateway's claims.
    return f"{socket.gethostname()[:64]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class _Outcome(enum.Enum):
    DONE = "done"
    REQUEUE = "requeue"  # interrupted: serve these again now, with whatever arrived
    RETRY_LATER = "retry_later"  # the model is unavailable: try again after a delay


class Gateway:
    """Intake plus per-session serving; see the module docstring."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        agent: AgentLoop,
        engine: ContextEngine,
        delivery: Delivery,
        directory: SessionDirectory,
        tools: list[dict[str, Any]] | None = None,
        tool_tokens: int = 0,
        lease_seconds: float = LEASE_SECONDS,
        retry_delays: Sequence[float] = RETRY_DELAYS,
        worker_id: str | None = None,
        clock: Callable[[], datetime] = utcnow,
        tasks: TaskBook | None = None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._agent = agent
        self._engine = engine
        self._delivery = delivery
        self._replies = Replies(store, delivery)
        self.streams = Streams(store, delivery.adapter, settings.delivery)
        self._media = MediaLoader(store, delivery.adapter, settings.media)
        self._directory = directory
        self._auth = Authorizer(settings)
        self._locks = SessionLocks()
        self._tools = tools or []
        self._tool_tokens = tool_tokens
        self._lease = lease_seconds
        self._retry_delays = tuple(retry_delays)
        self._worker_id = worker_id or default_worker_id()
        self._clock = clock
        self._tasks = tasks
        self._failures = InboxFailures(
            store,
            self._replies,
            worker_id=self._worker_id,
            max_attempts=settings.delivery.inbox_max_attempts,
            delays=self._retry_delays,
            clock=clock,
        )
        self._accepting = False
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._carry: dict[str, list[InboxRecord]] = {}
        self._turns: dict[str, asyncio.Task[TurnResult]] = {}
        self._cancel_reason: dict[str, str] = {}
        self._stopped: set[str] = set()
        self._retries: dict[str, int] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._sweeper: asyncio.Task[None] | None = None

    # lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Accept messages and serve what a previous run left: pending or lease-expired inbox items."""
        self._accepting = True
        await self._kick_claimable()
        self._sweeper = asyncio.create_task(self._sweep(), name="inbox lease sweep")
        self._delivery.notify()

    async def _kick_claimable(self) -> None:
        for key in await self._store.inbox_pending_keys():
            self._kick(key)

    async def _sweep(self) -> None:
        """Keep this worker's leases alive while its turns run (a long turn is not a dead
        worker), and serve items whose lease ran out: a worker, here or elsewhere, died holding
        them, and no new message may ever come to that chat to wake it."""
        every = max(1.0, min(self._lease / 3, SWEEP_MAX_SECONDS))
        while self._accepting:
            await asyncio.sleep(every)
            try:
                await self._store.inbox_renew(worker=self._worker_id, lease_seconds=self._lease)
                await self._kick_claimable()
            except Exception:  # the sweep is a safety net: log, and look again next time
                _log.exception("inbox sweep failed")

    async def stop(self, grace: float) -> None:
        """Stop serving new turns; let running ones finish for ``grace`` seconds, then cancel them.

        Whatever is cancelled stays in the inbox and is served again on the next start.
        """
        self._accepting = False
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        workers = list(self._workers.values())
        if workers:
            _done, late = await asyncio.wait(workers, timeout=grace)
            for task in late:
                task.cancel()
            if late:
                _log.warning(
                    "%d turn(s) did not finish within %.0fs; they resume on restart", len(late), grace
                )
                await asyncio.gather(*late, return_exceptions=True)
        # Unfinished items are still leased to us: without this a restart (or another worker)
        # would leave them unanswered until the lease ran out, and nothing would kick them then.
        try:
            released = await self._store.inbox_release(worker=self._worker_id)
        except Exception:  # stopping goes on regardless; the leases then simply expire
            _log.exception("could not hand back unfinished inbox items")
            return
        if released:
            _log.info("%d unfinished message(s) left for the next start", released)

    async def wait_idle(self) -> None:
        """Until no session has work in progress (tests and the console's pipe mode use it)."""
        await self._idle.wait()

    @property
    def busy_keys(self) -> list[str]:
        return list(self._workers)

    @asynccontextmanager
    async def quiet_session(self, key: str) -> AsyncIterator[bool]:
        """For a scheduled job about to act on a session: yields True holding the session's lock
        when nothing of it runs or waits here (no turn, no retry timer), so none starts until
        the block ends; yields False, holding nothing, when the session is busy."""
        if key in self._workers or key in self._timers or self._locks.locked(key):
            yield False
            return
        async with self._locks.hold(key):
            yield True

    def wake(self, key: str) -> None:
        """Serve ``key``'s pending inbox items now (a scheduled job has just queued one)."""
        self._kick(key)

    @property
    def worker_id(self) -> str:
        """This gateway's name in leases (inbox items, scheduled jobs)."""
        return self._worker_id

    # intake ------------------------------------------------------------------------------
    async def intake(self, msg: InboundMessage) -> None:
        """Authorize, clean, commit to the inbox, schedule the session; return (the adapter acks)."""
        if not self._auth.is_allowed(msg.platform, msg.user_id):
            await self._refuse(msg)
            return
        cleaned = clean_text(msg.text, self._settings.sessions.max_inbound_chars)
        key = session_key(msg, self._settings.sessions)
        inbox_id, created = await self._store.inbox_put(
            platform=msg.platform,
            chat_id=msg.chat_id,
            platform_message_id=inbox_message_id(msg),
            session_key=key,
            payload=inbox_payload(
                msg,
                cleaned,
                attachment_chars=self._settings.sessions.max_inbound_attachment_chars,
                total_chars=self._settings.sessions.max_inbound_total_chars,
            ),
            addressed=msg.addressed,
        )
        log_fields = {"platform": msg.platform, "key": key, "inbox_id": inbox_id}
        if not created:
            _log.info("duplicate delivery of a message; stored once", extra=log_fields)
            return
        _log.debug("message received", extra=log_fields)
        command = parse_command(cleaned.text) if msg.addressed and not msg.edited else None
        running = key in self._turns
        if command is not None and command.name in IMMEDIATE:
            if running:
                self._cancel_turn(key, "stop")
        elif (
            msg.addressed and running and command is None and self._settings.sessions.busy_mode == "interrupt"
        ):
            self._cancel_turn(key, "interrupt")
        if msg.addressed:
            self._kick(key)
        else:
            # Ambient messages are only stored: let them gather so that one claim and one
            # transaction store many (an addressed message kicks at once and takes them along).
            self._kick_later(key, AMBIENT_GATHER_SECONDS)

    async def _refuse(self, msg: InboundMessage) -> None:
        if not msg.addressed or not self._auth.should_notify_refusal(msg.platform, msg.user_id):
            return
        await self._store.audit(
            "refused", platform=msg.platform, user_id=msg.user_id, detail=f"chat {msg.chat_id}"
        )
        _log.info("refused a message from a user not on the allow list", extra={"platform": msg.platform})
        target = OutboundTarget(msg.platform, msg.chat_id, msg.thread_id, msg.platform_message_id)
        await self._delivery.send_direct(target, REFUSAL_TEXT)

    def _cancel_turn(self, key: str, reason: str) -> None:
        task = self._turns.get(key)
        if task is not None and not task.done():
            self._cancel_reason[key] = reason
            task.cancel()

    # per-session workers -----------------------------------------------------------------
    def _kick(self, key: str) -> None:
        self._dirty.add(key)
        if key in self._workers or not self._accepting:
            return
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._idle.clear()
        self._workers[key] = asyncio.create_task(self._work(key), name=f"session {key}")

    def _kick_later(self, key: str, delay: float) -> None:
        if self._accepting and key not in self._timers:
            self._idle.clear()
            self._timers[key] = asyncio.get_running_loop().call_later(delay, self._timer_fired, key)

    def _timer_fired(self, key: str) -> None:
        self._timers.pop(key, None)
        self._kick(key)
        self._update_idle()

    def _update_idle(self) -> None:
        if not self._workers and not self._timers:
            self._idle.set()

    async def _work(self, key: str) -> None:
        retry_in: float | None = None
        try:
            async with self._locks.hold(key):
                retry_in = await self._drain(key)
        except asyncio.CancelledError:
            raise
        except Exception:  # the one place a session's serving fails: log it, keep the items, try later
            _log.exception("serving a session failed; its messages stay in the inbox", extra={"key": key})
            retry_in = WORKER_ERROR_DELAY
        finally:
            self._workers.pop(key, None)
            if retry_in is not None:
                self._kick_later(key, retry_in)
            elif key in self._dirty and self._accepting:
                self._kick(key)
            self._update_idle()

    async def _drain(self, key: str) -> float | None:
        """Serve the session until nothing is pending; returns a delay when it must come back later."""
        while self._accepting:
            self._dirty.discard(key)
            carried = self._carry.pop(key, [])
            claimed = await self._store.inbox_claim(
                worker=self._worker_id,
                lease_seconds=self._lease,
                session_key=key,
                limit=self._failures.batch_size(key, CLAIM_BATCH),
            )
            claimed = await self._failures.weed(claimed)
            seen = {item.id for item in carried}
            items = sorted(carried + [i for i in claimed if i.id not in seen], key=lambda i: i.id)
            if not items:
                if key in self._dirty:
                    continue
                return await self._failures.retry_in(key)
            try:
                outcome, rest = await self._serve(key, items)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # per-item isolation and dead letters: gateway.dead_letters
                await self._failures.failed(key, items, exc)
                continue
            if outcome is _Outcome.RETRY_LATER:
                self._carry[key] = rest
                attempt = max(1, self._retries.get(key, 1))
                return self._retry_delays[min(attempt, len(self._retry_delays)) - 1]
            if outcome is _Outcome.REQUEUE:
                self._carry[key] = rest
        return None

    async def _serve(self, key: str, items: list[InboxRecord]) -> tuple[_Outcome, list[InboxRecord]]:
        """Commands in order between runs of ordinary messages; returns what is left to serve."""
        segment: list[InboxRecord] = []
        for index, item in enumerate(items):
            is_command = item.addressed and edit_of(item) is None
            command = parse_command(payload_text(item)) if is_command else None
            if command is None:
                segment.append(item)
                continue
            if segment:
                outcome = await self._serve_messages(key, segment)
                if outcome is not _Outcome.DONE:
                    return outcome, segment + items[index:]
                segment = []
            await self._serve_command(key, item, command)
        if segment:
            outcome = await self._serve_messages(key, segment)
            if outcome is not _Outcome.DONE:
                return outcome, segment
        return _Outcome.DONE, []

    # messages ----------------------------------------------------------------------------
    async def _serve_messages(self, key: str, items: list[InboxRecord]) -> _Outcome:
        info = await self._directory.current(key, items[0])
        session = self._directory.agent_session(info)
        addressed: list[PendingItem] = []
        ambient: list[tuple[int, ChatMessage]] = []  # plain ambient messages: stored together
        for item in items:
            if not item.addressed and edit_of(item) is None and not item.payload.get("attachments"):
                ambient.append((item.id, user_message(item)))
                continue
            if ambient:  # keep the order: what came before is stored before this one
                await self._store.capture_messages(session.id, ambient)
                ambient = []
            if await self._applied_edit(session.id, item):
                continue
            built, unreadable = await self._media.message_for(session, item)
            message = await self._store.append_message(session.id, built)
            if unreadable and item.addressed and self._retries.get(key, 0) == 0:
                await self._replies.notice(
                    session.id, without_quote(reply_target(item)), media_notice(unreadable)
                )
            if item.addressed:
                addressed.append(PendingItem(item, message))
            else:
                await self._store.inbox_mark([item.id], "done", message_id=message.id)
        if ambient:
            await self._store.capture_messages(session.id, ambient)
        await self._store.touch_session(session.id, self._clock())
        if not addressed:
            return _Outcome.DONE
        pending = await self._replies.unanswered(session.id, addressed)
        if not pending:
            return _Outcome.DONE
        target = reply_target(pending[-1].item)
        for p in pending:
            truncated_from = p.item.payload.get("truncated_from")
            if truncated_from and self._retries.get(key, 0) == 0:
                kept = len(payload_text(p.item))
                await self._replies.notice(
                    session.id, without_quote(target), truncation_note(kept, int(truncated_from))
                )
        return await self._answer(key, session, pending, target)

    async def _applied_edit(self, session_id: str, item: InboxRecord) -> bool:
        """An edit updates the stored message in place and is not answered again.

        An edit of a message we never stored (sent before the bot joined, say) is taken as
        a new message instead.
        """
        original = edit_of(item)
        if original is None:
            return False
        if parse_command(payload_text(item)) is not None:
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

    async def _answer(
        self, key: str, session: AgentSession, pending: list[PendingItem], target: OutboundTarget
    ) -> _Outcome:
        # Typing from before hygiene: a compaction can take a while, the user should see life.
        typing = asyncio.create_task(self._replies.keep_typing(target))
        when_slow = self._summarizing_notice(session.id, target)
        try:
            history = await self._store.load_active(session.id)
            report = await run_hygiene(
                self._engine,
                self._store,
                session,
                self._settings.compression,
                messages=history,
                tools=self._tools,
                when_slow=when_slow,
            )
            notice = report.notice() if self._settings.sessions.hygiene_notice else None
            if notice:
                await self._replies.notice(session.id, without_quote(target), notice)
        except BaseException:
            typing.cancel()
            raise
        live = self.streams.open(session.id, target)
        turn: asyncio.Task[TurnResult] = asyncio.create_task(
            self._agent.run_turn(session, history=report.messages, when_slow=when_slow, listener=live)
        )
        self._turns[key] = turn
        try:
            await asyncio.wait({turn})
        except asyncio.CancelledError:
            turn.cancel()
            if live is not None:
                live.detach()  # its stream stays open: the next start marks it interrupted
            raise
        finally:
            self._turns.pop(key, None)
            typing.cancel()
        if turn.cancelled():
            if live is not None:
                stopped = self._cancel_reason.get(key, "stop") == "stop"
                await live.abandon(STOPPED_NOTE if stopped else INTERRUPTED_NOTE)
            return await self._interrupted(key, session, pending)
        exc = turn.exception()
        if exc is None:
            self._retries.pop(key, None)
            text, message_id = reply_of(turn.result())
            if live is None or not await self.streams.deliver(live, pending, text, message_id):
                await self._replies.reply(session.id, pending, target, text, message_id)
            return _Outcome.DONE
        if live is not None:
            await live.abandon(INTERRUPTED_NOTE)
        return await self._failed(key, session, pending, target, exc)

    def _summarizing_notice(self, session_id: str, target: OutboundTarget) -> WhenSlow:
        """Tell the chat, once per turn, when a compaction runs longer than a few seconds."""
        sent = False

        async def notify() -> None:
            nonlocal sent
            if not sent:
                sent = True
                await self._replies.notice(session_id, without_quote(target), SUMMARIZING_NOTICE)

        return WhenSlow(notify, self._settings.sessions.summarizing_notice_seconds)

    async def _interrupted(self, key: str, session: AgentSession, pending: list[PendingItem]) -> _Outcome:
        reason = self._cancel_reason.pop(key, "stop")
        if reason == "interrupt":
            _log.info("turn interrupted by a new message", extra={"session": session.id})
            return _Outcome.REQUEUE
        self._stopped.add(key)
        for p in pending:
            await self._store.inbox_mark([p.item.id], "done", message_id=p.message.id)
        _log.info("turn stopped by /stop", extra={"session": session.id})
        return _Outcome.DONE

    async def _failed(
        self,
        key: str,
        session: AgentSession,
        pending: list[PendingItem],
        target: OutboundTarget,
        exc: BaseException,
    ) -> _Outcome:
        fields = {"session": session.id, "error": type(exc).__name__}
        if isinstance(exc, StoreError):
            raise exc  # the worker keeps the items and comes back later
        failure = classify(exc)
        text = failure.text
        if failure.retry:
            attempt = self._retries.get(key, 0) + 1
            self._retries[key] = attempt
            if attempt <= len(self._retry_delays):
                _log.warning("model unavailable (attempt %d); will retry: %s", attempt, exc, extra=fields)
                if attempt == 1:
                    await self._replies.notice(session.id, without_quote(target), failure.text)
                return _Outcome.RETRY_LATER
            self._retries.pop(key, None)
            text = GAVE_UP
        if isinstance(exc, LLMError):
            _log.error("turn failed: %s", exc, extra=fields)
        else:
            _log.error("turn failed", exc_info=exc, extra=fields)
        await self._replies.reply(
            session.id, pending, target, text, None, status="failed", error=type(exc).__name__
        )
        return _Outcome.DONE

    # commands ----------------------------------------------------------------------------
    async def _serve_command(self, key: str, item: InboxRecord, command: Command) -> None:
        info: SessionInfo = await self._directory.current(key, item)
        session = self._directory.agent_session(info)
        if command.name == "stop":
            text = "Stopped." if key in self._stopped else "Nothing is running."
            self._stopped.discard(key)
        else:
            user_id = str(item.payload.get("user_id") or "")
            ctx = CommandContext(
                store=self._store,
                engine=self._engine,
                compression=self._settings.compression,
                session=session,
                info=info,
                is_admin=self._auth.is_admin(item.platform, user_id),
                tool_tokens=self._tool_tokens,
                clock=self._clock,
                tasks=self._tasks,
            )
            text = await run_command(ctx, command)
        await self._replies.answer_command(session.id, item, text)
        _log.info("command /%s", command.name, extra={"session": session.id, "key": key})
