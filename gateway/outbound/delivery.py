"""The outbox worker: sends stored replies, split to each platform's limit, with retry and backoff.

A reply is in SQL (``outbox``) before it is sent; this worker claims due rows for the
platforms it runs (a lease, so several workers never send one row at once), splits the
text with the shared splitter, sends the parts in order and records the platform ids.
A failed send (an :class:`AdapterError`, or any other exception: one row must never stall its
chat) is retried with exponential backoff; after ``max_attempts`` the row is marked failed with
its error (a dead letter), logged, and the chat is told once in plain words. A final refusal by
the platform (:class:`agent.errors.DeliveryRefused`: a 4xx other than 429) is a dead letter at
once. Delivery is at-least-once at the platform boundary: a crash between a send and its record
may repeat that one message.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from agent.clock import Clock, utcnow
from gateway.errors import AdapterError
from gateway.outbound.failures import UNDELIVERED
from gateway.platforms.base import OutboundTarget, PlatformAdapter
from gateway.splitter import DEFAULT_MAX_PARTS, split_message
from gateway.store.outbox_ops import outbox_chat_lease
from gateway.store.records import OutboxRecord
from gateway.store.repository import Store

_log = logging.getLogger(__name__)

SURPLUS = "…"
"""What a message left over from a longer partial shows once the reply is edited in."""


def target_to_dict(target: OutboundTarget) -> dict[str, Any]:
    return {
        "platform": target.platform,
        "chat_id": target.chat_id,
        "thread_id": target.thread_id,
        "reply_to_message_id": target.reply_to_message_id,
    }


def target_from_dict(data: Mapping[str, Any]) -> OutboundTarget:
    def opt(name: str) -> str | None:
        value = data.get(name)
        return None if value is None else str(value)

    return OutboundTarget(
        platform=str(data["platform"]),
        chat_id=str(data["chat_id"]),
        thread_id=opt("thread_id"),
        reply_to_message_id=opt("reply_to_message_id"),
    )


class Delivery:
    """Sends due outbox rows; ``notify()`` wakes it, and so does a retry of its own falling due;
    otherwise it polls every ``poll_seconds`` (for rows other processes put off)."""

    def __init__(
        self,
        store: Store,
        adapters: Mapping[str, PlatformAdapter],
        *,
        max_attempts: int = 6,
        base_delay: float = 2.0,
        max_delay: float = 600.0,
        poll_seconds: float = 2.0,
        lease_seconds: float = 120.0,
        max_parts: int | None = DEFAULT_MAX_PARTS,
        clock: Clock = utcnow,
        owner: str | None = None,
    ) -> None:
        self._store = store
        # With an owner (several workers deliver), each round takes its chats' leases: per-chat order.
        self._owner = owner
        self._adapters = adapters
        self._max_attempts = max_attempts
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._poll = poll_seconds
        self._lease = lease_seconds
        self._max_parts = max_parts
        self._clock = clock
        self._wake = asyncio.Event()
        self._round = asyncio.Lock()  # one round at a time, or a due row could be sent twice
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        # Parts already sent of a row whose later part failed: a retry in this process resumes there.
        self._progress: dict[int, list[str]] = {}
        # When this process's retries fall due, soonest first: the loop wakes for them, not a poll later.
        self._retries: list[datetime] = []

    # lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> Delivery:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        if self._task is None:
            self._stopping = False
            self._task = asyncio.create_task(self._run(), name="outbox-delivery")

    async def stop(self, *, within: float = 5.0) -> None:
        """Finish the round in progress (bounded by ``within`` seconds), then stop."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        self._wake.set()
        try:
            await asyncio.wait_for(task, within)
        except TimeoutError:
            _log.warning("delivery did not finish within %.1fs; pending replies stay in the outbox", within)

    def adapter(self, platform: str) -> PlatformAdapter | None:
        """The running adapter of ``platform`` (streamed replies talk to it directly)."""
        return self._adapters.get(platform)

    def notify(self) -> None:
        """A new row is due: deliver it now rather than at the next poll."""
        self._wake.set()

    # work --------------------------------------------------------------------------------
    async def _run(self) -> None:
        while not self._stopping:
            self._wake.clear()
            now = self._clock()
            while self._retries and self._retries[0] <= now:
                heapq.heappop(self._retries)  # this round claims them
            try:
                await self.flush()
            except Exception:  # the one place a delivery round fails: log it, try again next poll
                _log.exception("delivery round failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._until_next_round())
        # One last round so replies produced during shutdown go out.
        with contextlib.suppress(Exception):
            await self.flush()

    def _until_next_round(self) -> float:
        """Seconds until the next poll, or sooner when one of this process's retries falls due."""
        if not self._retries:
            return self._poll
        return max(0.0, min(self._poll, (self._retries[0] - self._clock()).total_seconds()))

    async def flush(self) -> int:
        """Deliver every due row once (in order per chat, chats concurrently); returns how many were due."""
        async with self._round:
            rows = await self._store.outbox_claim(
                now=self._clock(),
                lease_seconds=self._lease,
                platforms=list(self._adapters),
                limit=200,
                owner=self._owner,
            )
            by_chat: dict[tuple[str, str], list[OutboxRecord]] = {}
            for row in rows:
                target = row.target
                by_chat.setdefault((str(target.get("platform")), str(target.get("chat_id"))), []).append(row)
            renewing = None
            if self._owner is not None and rows:
                renewing = asyncio.create_task(self._renew([row.id for row in rows], self._owner))
            try:
                await asyncio.gather(*(self._deliver_chat(chat_rows) for chat_rows in by_chat.values()))
            finally:
                if renewing is not None:
                    renewing.cancel()
            return len(rows)

    async def _renew(self, ids: list[int], owner: str) -> None:
        """Keep the round's chats and rows while it sends (a send that waits out a 429 is not a
        dead worker), so the lease can be short and a dead worker's replies go out soon."""
        while True:
            await asyncio.sleep(max(0.5, self._lease / 3))
            try:
                await self._store.outbox_renew(ids, owner=owner, lease_seconds=self._lease)
            except Exception:  # the lease then runs out; another worker may resend (at-least-once)
                _log.warning("could not renew a delivery round's leases", exc_info=True)

    async def _deliver_chat(self, rows: list[OutboxRecord]) -> None:
        claimed = time.monotonic()
        try:
            for row in rows:
                if not await self._still_ours(row, claimed):
                    _log.warning("lost a chat's delivery lease; its replies are left to its new owner")
                    return
                await self.deliver(row)
        finally:
            if self._owner is not None:
                # The chat is free for any worker's next round (its lease would expire anyway).
                try:
                    await self._store.lease_release(outbox_chat_lease(rows[0].target), self._owner)
                except Exception:  # the lease then runs out on its own
                    _log.warning("could not release a chat's delivery lease", exc_info=True)

    async def _still_ours(self, row: OutboxRecord, claimed: float) -> bool:
        """Whether this round still holds the row's chat. Asked only once a third of the lease has
        gone by since the claim (a worker frozen past its lease wakes here): a worker that took
        the chat over meanwhile sends the row itself, and a second copy must not follow."""
        if self._owner is None or time.monotonic() - claimed < self._lease / 3:
            return True
        lease = await self._store.lease_renew(
            outbox_chat_lease(row.target), self._owner, ttl_seconds=self._lease
        )
        return lease is not None

    async def deliver(self, row: OutboxRecord) -> bool:
        """Send one row; True when it is now sent."""
        target = target_from_dict(row.target)
        adapter = self._adapters.get(target.platform)
        if adapter is None:
            # The platform is not running in this process: look again later without counting a failure.
            later = self._clock() + timedelta(seconds=self._max_delay)
            await self._store.outbox_mark_retry(
                row.id, next_attempt_at=later, error=f"platform {target.platform} not running"
            )
            return False
        parts = self._split(row.text, adapter)
        if row.stream_id is not None and await self._onto_stream(row, row.stream_id, parts, adapter):
            return True
        sent = self._progress.setdefault(row.id, [])
        try:
            for index in range(len(sent), len(parts)):
                part_target = target if index == 0 else adapter.continuation(target)
                ids = await adapter.send(part_target, parts[index])
                sent.append(",".join(ids))
        except AdapterError as exc:
            await self._failed(row, exc)
            return False
        except Exception as exc:  # one row's bug must not stall its chat: count it like any failure
            _log.error("sending a reply raised", exc_info=exc, extra={"outbox_id": row.id})
            await self._failed(row, exc)
            return False
        self._progress.pop(row.id, None)
        await self._store.outbox_mark_sent(row.id, [i for i in sent if i])
        return True

    async def _onto_stream(
        self, row: OutboxRecord, stream_id: int, parts: list[str], adapter: PlatformAdapter
    ) -> bool:
        """A reply re-delivered after a takeover whose stream already shows messages: edit those
        (new messages only for parts beyond them) instead of sending it again. False when the
        stream shows nothing, or an edit fails (then the reply is sent as usual)."""
        stream = await self._store.stream_get(stream_id)
        if stream is None or not stream.message_ids:
            return False
        target = target_from_dict(row.target)
        ids = list(stream.message_ids)
        try:
            for index, part in enumerate(parts):
                if index < len(ids):
                    await adapter.edit(target, ids[index], part)
                else:
                    where = target if index == 0 else adapter.continuation(target)
                    ids.extend(await adapter.send(where, part))
            for index in range(len(parts), len(stream.message_ids)):  # a longer partial left some over
                await adapter.edit(target, ids[index], SURPLUS)
        except AdapterError as exc:
            _log.warning("could not edit a re-delivered reply into its stream; sending it: %s", exc)
            await self._store.stream_close(stream_id)
            return False
        await self._store.stream_redelivered(stream_id, row.id, ids[: max(len(parts), 1)])
        return True

    async def _failed(self, row: OutboxRecord, exc: Exception) -> None:
        attempts = row.attempts + 1
        error = str(exc) if isinstance(exc, AdapterError) else f"{type(exc).__name__}: {exc}"
        fields = {"outbox_id": row.id, "platform": row.target.get("platform")}
        # A final refusal (chat gone, bot blocked: AdapterError.permanent) is not worth a minute
        # of retries that would also hold the chat's next replies out of order.
        if attempts >= self._max_attempts or (isinstance(exc, AdapterError) and exc.permanent):
            self._progress.pop(row.id, None)
            await self._store.outbox_mark_failed(row.id, error)
            _log.error("giving up on a reply after %d attempt(s): %s", attempts, error, extra=fields)
            await self._tell_undelivered(row)
            return
        delay = min(self._max_delay, self._base_delay * 2 ** (attempts - 1))
        retry_after = getattr(exc, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after > delay:
            delay = float(retry_after)
        due = self._clock() + timedelta(seconds=delay)
        await self._store.outbox_mark_retry(row.id, next_attempt_at=due, error=error)
        heapq.heappush(self._retries, due)
        _log.warning("send failed (attempt %d), retrying in %.1fs: %s", attempts, delay, error, extra=fields)

    async def _tell_undelivered(self, row: OutboxRecord) -> None:
        """Tell the chat once, in plain words; a failure notice that fails is not followed by another."""
        if row.kind == "failure_notice":
            return
        await self._store.outbox_put(
            session_id=row.session_id,
            target={**row.target, "reply_to_message_id": None},
            text=UNDELIVERED,
            inbox_ids=[],
            message_id=None,
            kind="failure_notice",
        )
        self.notify()

    def _split(self, text: str, adapter: PlatformAdapter) -> list[str]:
        return split_message(text, adapter.text_limit, measure=adapter.measure, max_parts=self._max_parts)

    async def typing(self, target: OutboundTarget) -> None:
        """Show a typing indicator; best effort."""
        adapter = self._adapters.get(target.platform)
        if adapter is None:
            return
        try:
            await adapter.send_typing(target)
        except AdapterError as exc:
            _log.debug("typing indicator failed: %s", exc, extra={"platform": target.platform})

    async def send_direct(self, target: OutboundTarget, text: str) -> None:
        """Best-effort send that is not a reply (a refusal to a stranger): not stored, not retried."""
        adapter = self._adapters.get(target.platform)
        if adapter is None:
            return
        try:
            for part in self._split(text, adapter):
                await adapter.send(target, part)
        except AdapterError as exc:
            _log.info("direct send failed: %s", exc, extra={"platform": target.platform})
