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

This module is intake and the per-session workers (claim, drain, commands in order);
:mod:`gateway.turns` serves a run of ordinary messages as one turn.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from agent.context_engine import ContextEngine
from agent.loop import AgentLoop
from gateway.auth import REFUSAL_TEXT, Authorizer
from gateway.commands import IMMEDIATE, Command, CommandContext, parse_command, run_command
from gateway.config import Settings
from gateway.dead_letters import InboxFailures
from gateway.delivery import Delivery
from gateway.inbound import (
    clean_text,
    edit_of,
    inbox_message_id,
    inbox_payload,
    payload_text,
)
from gateway.media_loader import MediaLoader
from gateway.platforms.base import InboundMessage, OutboundTarget
from gateway.replies import Replies
from gateway.sessions import SessionDirectory, SessionLocks, session_key
from gateway.store.records import InboxRecord, SessionInfo
from gateway.store.repository import Store
from gateway.streaming import Streams
from gateway.tasks import TaskBook
from gateway.turns import Outcome, TurnBook, TurnServer

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
        self._book = TurnBook()
        self._turn = TurnServer(
            settings=settings,
            store=store,
            agent=agent,
            engine=engine,
            replies=self._replies,
            streams=self.streams,
            media=self._media,
            directory=directory,
            tools=self._tools,
            retry_delays=self._retry_delays,
            clock=clock,
            book=self._book,
        )
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

    async def poll_inbox(self) -> None:
        """Serve what another process received (a cluster worker calls this every so often)."""
        await self._kick_claimable()

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
        running = key in self._book.running
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
        self._book.cancel(key, reason)

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
            # The claim reads the key's current session in the same transaction, and appends
            # the messages when they are plain (TurnServer.prebuild); not with carried items,
            # which must go first.
            claim = await self._store.claim_turn(
                worker=self._worker_id,
                lease_seconds=self._lease,
                session_key=key,
                limit=self._failures.batch_size(key, CLAIM_BATCH),
                prebuild=None if carried else self._turn.prebuild,
                at=self._clock(),
            )
            claimed = await self._failures.weed(claim.items)
            seen = {item.id for item in carried}
            items = sorted(carried + [i for i in claimed if i.id not in seen], key=lambda i: i.id)
            if not items:
                if key in self._dirty:
                    continue
                return await self._failures.retry_in(key)
            try:
                if claim.appended is not None:
                    # Plain messages only (no command among them): one run, one turn.
                    outcome = await self._turn.serve(key, items, claim.session, claim.appended)
                    rest = items if outcome is not Outcome.DONE else []
                else:
                    outcome, rest = await self._serve(key, items, claim.session)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # per-item isolation and dead letters: gateway.dead_letters
                await self._failures.failed(key, items, exc)
                continue
            if outcome is Outcome.RETRY_LATER:
                self._carry[key] = rest
                attempt = max(1, self._book.retries.get(key, 1))
                return self._retry_delays[min(attempt, len(self._retry_delays)) - 1]
            if outcome is Outcome.REQUEUE:
                self._carry[key] = rest
        return None

    async def _serve(
        self, key: str, items: list[InboxRecord], current: SessionInfo | None
    ) -> tuple[Outcome, list[InboxRecord]]:
        """Commands in order between runs of ordinary messages; returns what is left to serve.

        ``current`` (the key's session as the claim read it) serves the first run only: a command
        may end the session (``/new``), and whatever follows it looks the session up again.
        """
        segment: list[InboxRecord] = []
        for index, item in enumerate(items):
            is_command = item.addressed and edit_of(item) is None
            command = parse_command(payload_text(item)) if is_command else None
            if command is None:
                segment.append(item)
                continue
            if segment:
                outcome = await self._turn.serve(key, segment, current)
                if outcome is not Outcome.DONE:
                    return outcome, segment + items[index:]
                segment = []
            current = None
            await self._serve_command(key, item, command)
        if segment:
            outcome = await self._turn.serve(key, segment, current)
            if outcome is not Outcome.DONE:
                return outcome, segment
        return Outcome.DONE, []

    # commands ----------------------------------------------------------------------------
    async def _serve_command(self, key: str, item: InboxRecord, command: Command) -> None:
        info: SessionInfo = await self._directory.current(key, item)
        session = self._directory.agent_session(info)
        if command.name == "stop":
            text = "Stopped." if key in self._book.stopped else "Nothing is running."
            self._book.stopped.discard(key)
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
