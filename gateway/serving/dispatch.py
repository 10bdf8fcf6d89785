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
:mod:`gateway.serving.turns` serves a run of ordinary messages as one turn.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from agent.clock import Clock, utcnow
from agent.context_engine import ContextEngine
from agent.errors import WriteConflict
from gateway.config import Settings
from gateway.outbound.delivery import Delivery
from gateway.outbound.replies import Replies
from gateway.outbound.streaming import Streams
from gateway.platforms.base import InboundMessage, OutboundTarget
from gateway.platforms.manners import BotManners
from gateway.platforms.webhooks.coalescing import joined_burst
from gateway.scheduling.tasks import TaskBook
from gateway.serving.auth import REFUSAL_TEXT, Authorizer
from gateway.serving.claim_plan import PlannedClaim
from gateway.serving.commands import IMMEDIATE, Command, CommandContext, command_in, run_command
from gateway.serving.dead_letters import InboxFailures
from gateway.serving.inbound import InboxItem, clean_text, inbox_message_id, inbox_payload, parse_item
from gateway.serving.media_loader import MediaLoader
from gateway.serving.retry import RetryPolicy
from gateway.serving.sessions import SessionDirectory, SessionLocks, session_key
from gateway.serving.tool_view import ToolView, tool_scope
from gateway.serving.turns import CANCEL_REASONS, Outcome, TurnBook, TurnServer
from gateway.serving.webhook_items import WINDOW_SLACK, coalescing_until
from gateway.store import fence
from gateway.store.base import CONFLICT_RETRIES
from gateway.store.records import InboxRecord, SessionInfo
from gateway.store.repository import Store

_log = logging.getLogger(__name__)

LEASE_SECONDS = 300.0
WORKER_ERROR_DELAY = 5.0
CLAIM_BATCH = 50
SWEEP_MAX_SECONDS = 60.0
AMBIENT_GATHER_SECONDS = 0.2


def default_worker_id() -> str:
    # Unique per Gateway, not per process: stop() hands back exactly this gateway's claims.
    return f"{socket.gethostname()[:64]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, slots=True)
class ServingParts:
    """The collaborators a :class:`Gateway` serves with, built by ``gateway.runner.build_gateway``."""

    replies: Replies
    streams: Streams
    media: MediaLoader
    auth: Authorizer
    locks: SessionLocks
    failures: InboxFailures
    book: TurnBook
    turn: TurnServer
    retry: RetryPolicy
    manners: BotManners


class Gateway:
    """Intake plus per-session serving; see the module docstring. Constructs nothing: its parts are
    handed in by the one builder (``gateway.runner``)."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        engine: ContextEngine,
        delivery: Delivery,
        directory: SessionDirectory,
        parts: ServingParts,
        worker_id: str,
        tools: list[dict[str, Any]] | None = None,
        tool_tokens: int = 0,
        tool_view: ToolView | None = None,
        lease_seconds: float = LEASE_SECONDS,
        clock: Clock = utcnow,
        tasks: TaskBook | None = None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._engine = engine
        self._delivery = delivery
        self._replies = parts.replies
        self.streams = parts.streams
        self._directory = directory
        self._auth = parts.auth
        self._manners = parts.manners
        self._locks = parts.locks
        self._tools = tools or []
        self._tool_tokens = tool_tokens
        self._tool_view = tool_view
        self._lease = lease_seconds
        self._retry = parts.retry
        self._worker_id = worker_id
        self._clock = clock
        self._tasks = tasks
        self._failures = parts.failures
        self._accepting = False
        self._started = False
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._carry: dict[str, list[InboxItem]] = {}
        self._book = parts.book
        self._turn = parts.turn
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._sweeper: asyncio.Task[None] | None = None

    # lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop(self._settings.sessions.turn_grace_seconds)

    async def start(self) -> None:
        """Accept messages and serve what a previous run left: pending or lease-expired inbox items."""
        self._accepting = True
        await self._kick_claimable()
        for key, due in (await self._store.inbox_waiting()).items():  # retries, webhook windows
            self._kick_later(key, max(0.0, (due - self._clock()).total_seconds()) + WINDOW_SLACK)
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

    def cancel_turn(self, key: str, reason: str) -> None:
        """Another process was told to stop ``key``'s turn (``stop``, ``new``, an admin's ``end``) or
        to interrupt it: cancel it if it runs here."""
        if reason in CANCEL_REASONS and key in self._book.running:
            _log.info("turn cancelled from another node (%s)", reason, extra={"key": key})
            self._cancel_turn(key, reason)

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
        msg = self._manners.judge(msg)
        # A webhook's signature, checked by its route, is its authorization.
        if msg.webhook is None and not self._auth.is_allowed(msg.platform, msg.user_id):
            await self._refuse(msg)
            return
        cleaned = clean_text(msg.text, self._settings.sessions.max_inbound_chars)
        key = session_key(msg, self._settings.sessions)
        not_before = await coalescing_until(self._store, key, msg.webhook, self._clock())
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
            not_before=not_before,
        )
        log_fields = {"platform": msg.platform, "key": key, "inbox_id": inbox_id}
        if not created:
            _log.info("duplicate delivery of a message; stored once", extra=log_fields)
            return
        _log.debug("message received", extra=log_fields)
        if msg.webhook is not None:
            if not_before is None:
                self._kick(key)
            else:  # served with the rest of its burst when the window closes
                self._kick_later(key, (not_before - self._clock()).total_seconds() + WINDOW_SLACK)
            return
        command = None if msg.edited else command_in(cleaned.text, addressed=msg.addressed)
        running = key in self._book.running
        reason = None
        if command is not None and command.name in IMMEDIATE:
            reason = command.name
        elif msg.addressed and command is None and self._settings.sessions.busy_mode == "interrupt":
            reason = "interrupt"
        if reason is not None:
            if running:
                self._cancel_turn(key, reason)
            else:
                # The turn may run on another worker of the cluster: every worker hears this.
                await self._store.notify_command(key, reason)
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
        conflicts = 0
        while self._accepting:
            self._dirty.discard(key)
            carried = self._carry.pop(key, [])
            # The claim reads the key's current session in the same transaction (opening the
            # key's first one), and appends the messages when the plan finds them plain
            # (gateway.serving.claim_plan); not with carried items, which must go first.
            planned = PlannedClaim(key, self._turn, self._directory)
            at = self._clock()
            try:
                claim = await self._store.claim_turn(
                    worker=self._worker_id,
                    lease_seconds=self._lease,
                    session_key=key,
                    limit=self._failures.batch_size(key, CLAIM_BATCH),
                    plan=None if carried else planned.plan,
                    opening=None if carried else planned.opening,
                    at=at,
                )
            except WriteConflict:
                # Rolled back, claim and all: lost a race we did not lock against; claim again.
                conflicts += 1
                if conflicts >= CONFLICT_RETRIES:
                    raise
                self._carry[key] = carried
                continue
            claimed = await self._failures.weed(await self._parsed(key, claim.items, planned.parsed))
            seen = {item.id for item in carried}
            items = sorted(carried + [i for i in claimed if i.id not in seen], key=lambda i: i.id)
            if not items:
                if key in self._dirty:
                    continue
                return await self._failures.retry_in(key)
            try:
                # Every write from here on is fenced by the claim just taken (gateway.store.fence).
                with fence.holding(self._worker_id, key):
                    if claim.appended is not None:
                        # Plain messages only (no command among them): one run, one turn.
                        outcome = await self._turn.serve(key, items, claim.session, claim.appended)
                        rest = items if outcome is not Outcome.DONE else []
                    else:
                        outcome, rest = await self._serve(key, items, claim.session)
            except asyncio.CancelledError:
                raise
            except fence.LeaseLost:
                # Paused or cut off past the lease: anything this turn still had to say is dropped,
                # not written. Another worker may own the session now; if none took it, its items
                # are handed back and claimed again, so the chat is never left holding them.
                self._carry.pop(key, None)
                self._book.retries.pop(key, None)
                released = await self._store.inbox_release(worker=self._worker_id, session_key=key)
                fate = f"{released} item(s) handed back" if released else "left to its new owner"
                _log.warning("lost the session's lease mid-turn; %s", fate, extra={"key": key})
                return 0.0 if released else None
            except Exception as exc:  # per-item isolation and dead letters: gateway.serving.dead_letters
                await self._failures.failed(key, items, exc)
                continue
            if outcome is Outcome.RETRY_LATER:
                self._carry[key] = rest
                attempt = max(1, self._book.retries.get(key, 1))
                return self._retry.delay(attempt, why="the model was unavailable", key=key)
            if outcome is Outcome.REQUEUE:
                self._carry[key] = rest
        return None

    async def _parsed(
        self, key: str, records: list[InboxRecord], parsed: dict[int, InboxItem]
    ) -> list[InboxItem]:
        """The claimed rows as items (parsed by the claim's check when it ran); a row whose JSON
        does not parse fails alone, like any item that cannot be served."""
        items: list[InboxItem] = []
        for record in records:
            item = parsed.get(record.id)
            if item is None:
                try:
                    item = parse_item(record)
                except ValueError as exc:
                    await self._failures.failed(key, [record], exc)
                    continue
            items.append(item)
        return items

    async def _serve(
        self, key: str, items: list[InboxItem], current: SessionInfo | None
    ) -> tuple[Outcome, list[InboxItem]]:
        """Commands in order between runs of ordinary messages; returns what is left to serve.

        ``current`` (the key's session as the claim read it) serves the first run only: a command
        may end the session (``/new``), and whatever follows it looks the session up again.
        """
        relayed = [item for item in items if item.deliver_only]
        if relayed:
            info = await self._directory.current(key, relayed[0])
            text = joined_burst([item.text for item in relayed])
            await self._replies.relay(self._directory.agent_session(info).id, relayed, text)
            items = [item for item in items if not item.deliver_only]
        segment: list[InboxItem] = []
        for index, item in enumerate(items):
            command = item.command if item.is_command else None
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
    async def _serve_command(self, key: str, item: InboxItem, command: Command) -> None:
        info: SessionInfo = await self._directory.current(key, item)
        session = self._directory.agent_session(info)
        if command.name == "stop":
            text = "Stopped." if key in self._book.stopped else "Nothing is running."
            self._book.stopped.discard(key)
        else:
            user_id = item.user_id or ""
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
                next_model=lambda: self._directory.next_model(info),
                tools=self._tool_view,
                scope=tool_scope(self._auth, item.user_id, item.reply_target, info),
            )
            text = await run_command(ctx, command)
        await self._replies.answer_command(session.id, item, text)
        _log.info("command /%s", command.name, extra={"session": session.id, "key": key})
