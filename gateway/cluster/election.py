"""One intake per platform across the cluster, elected through a PostgreSQL lease.

Every intake-capable process runs an :class:`Election` with one :class:`IntakeSlot` per
platform (or per Discord shard group: a slot is just a lease name and a way to build the
adapter that receives). Each slot loop tries to take the slot's lease
(:meth:`gateway.store.lease_ops.LeaseOps.lease_acquire`, serialized by an advisory lock and
fenced by a generation). The holder starts the slot's intake adapter and renews every third of
the lease; the others retry every quarter of it. When the leader dies its lease simply runs
out and a standby takes over within ``ttl + ttl/4`` plus the adapter's start; when a leader
cannot renew (lost the lease, or the database is unreachable past its expiry) it stops its
intake at once, so two pollers overlap for at most one renewal interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from agent.clock import Clock, utcnow
from gateway.platforms.base import InboundHandler, PlatformAdapter
from gateway.store.lease_ops import Lease
from gateway.store.repository import Store

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IntakeSlot:
    """What one leader runs: ``lease`` is the lease name (``intake:telegram``,
    ``intake:discord:0-1`` for a shard group), ``build`` makes a fresh, unstarted adapter."""

    lease: str
    platform: str
    build: Callable[[], PlatformAdapter]


@dataclass
class SlotState:
    """What this process knows of one slot, for ``/metrics`` and logs."""

    leading: bool = False
    generation: int = 0
    expires_at: datetime | None = None
    took_over_at: datetime | None = None
    elections_won: int = 0


@dataclass
class ClusterState:
    """This process in the cluster: its role, id, and each slot it competes for."""

    role: str
    worker_id: str
    clustered: bool
    slots: dict[str, SlotState] = field(default_factory=dict)

    def leading(self) -> list[str]:
        return [name for name, slot in self.slots.items() if slot.leading]


class Election:
    """Runs the slot loops; ``start`` then ``stop`` (which hands leadership over at once)."""

    def __init__(
        self,
        store: Store,
        slots: list[IntakeSlot],
        handler: InboundHandler,
        state: ClusterState,
        *,
        ttl_seconds: float,
        clock: Clock = utcnow,
    ) -> None:
        self._store = store
        self._slots = slots
        self._handler = handler
        self._state = state
        self._ttl = ttl_seconds
        self._clock = clock
        self._tasks: list[asyncio.Task[None]] = []
        self._running: dict[str, PlatformAdapter] = {}
        self._held_until: dict[str, float] = {}  # lease -> monotonic time it surely holds until
        self._stopping = False
        for slot in slots:
            state.slots.setdefault(slot.lease, SlotState())

    def adapter(self, platform: str) -> PlatformAdapter | None:
        """The running intake adapter of ``platform`` here (it holds e.g. Discord interactions)."""
        for slot in self._slots:
            if slot.platform == platform and slot.lease in self._running:
                return self._running[slot.lease]
        return None

    async def start(self) -> None:
        """One election round inline (a lone process leads before ``start`` returns), then the loops."""
        self._stopping = False
        first = [await self._attempt(slot) for slot in self._slots]
        self._tasks = [
            asyncio.create_task(self._run(slot, wait), name=f"election {slot.lease}")
            for slot, wait in zip(self._slots, first, strict=True)
        ]

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        for slot in self._slots:
            await self._resign(slot, release=True)

    async def _run(self, slot: IntakeSlot, wait: float) -> None:
        while not self._stopping:
            await asyncio.sleep(wait)
            wait = await self._attempt(slot)

    async def _attempt(self, slot: IntakeSlot) -> float:
        """Take or renew the slot's lease, start or stop its intake; the seconds until the next try."""
        renew_every, retry_every = self._ttl / 3, self._ttl / 4
        asked = time.monotonic()
        try:
            lease = await self._store.lease_acquire(slot.lease, self._state.worker_id, ttl_seconds=self._ttl)
        except Exception:  # the database is away: leadership holds only until the lease runs out
            _log.exception("intake election: could not reach the database", extra={"lease": slot.lease})
            # Counted on this process's monotonic clock from before the last renewal was asked:
            # the lease's expiry is the database's time, which this node's clock need not agree with.
            if self._held_until.get(slot.lease, 0.0) <= time.monotonic():
                await self._resign(slot, release=False)
            return retry_every
        if lease is None:
            await self._resign(slot, release=False)
            return retry_every
        self._held_until[slot.lease] = asked + self._ttl
        self._note(slot, lease)
        if slot.lease not in self._running and not await self._lead(slot):
            await self._store.lease_release(slot.lease, self._state.worker_id)
            self._state.slots[slot.lease].leading = False
            return retry_every
        return renew_every

    def _note(self, slot: IntakeSlot, lease: Lease) -> None:
        state = self._state.slots[slot.lease]
        if not state.leading:
            state.took_over_at = self._clock()
            state.elections_won += 1
            _log.info(
                "intake election: leading %s (generation %d)",
                slot.lease,
                lease.generation,
                extra={"lease": slot.lease, "generation": lease.generation},
            )
        state.leading, state.generation, state.expires_at = True, lease.generation, lease.expires_at

    async def _lead(self, slot: IntakeSlot) -> bool:
        """Start the slot's intake, renewing the lease while it starts (Discord waits for READY, a
        few seconds per shard); False (and logged) when it could not start or the lease was lost."""
        adapter = slot.build()
        starting = asyncio.create_task(adapter.start(self._handler), name=f"start {slot.lease}")
        lost = False
        try:
            while not (await asyncio.wait({starting}, timeout=self._ttl / 3))[0]:
                asked = time.monotonic()
                lease = await self._store.lease_acquire(
                    slot.lease, self._state.worker_id, ttl_seconds=self._ttl
                )
                if lease is None:
                    lost = True
                    starting.cancel()
                    break
                self._held_until[slot.lease] = asked + self._ttl
                self._note(slot, lease)
            await starting
        except asyncio.CancelledError:
            await self._abandon(starting, adapter)
            if lost:
                _log.warning("intake election: lost %s while its intake was starting", slot.lease)
                return False
            raise  # this loop is being stopped
        except Exception:  # an intake that cannot start: hand the lease to a standby that might
            _log.exception("intake election: the %s intake did not start", slot.platform)
            await self._abandon(starting, adapter)
            return False
        self._running[slot.lease] = adapter
        return True

    @staticmethod
    async def _abandon(starting: asyncio.Task[None], adapter: PlatformAdapter) -> None:
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        with contextlib.suppress(Exception):
            await adapter.stop()

    async def _resign(self, slot: IntakeSlot, *, release: bool) -> None:
        state = self._state.slots[slot.lease]
        adapter = self._running.pop(slot.lease, None)
        if state.leading:
            _log.warning("intake election: no longer leading %s", slot.lease, extra={"lease": slot.lease})
        state.leading = False
        if adapter is not None:
            try:
                await adapter.stop()
            except Exception:  # stopping goes on; the adapter is dropped either way
                _log.exception("intake election: stopping the %s intake failed", slot.platform)
        if release:
            with contextlib.suppress(Exception):
                await self._store.lease_release(slot.lease, self._state.worker_id)
