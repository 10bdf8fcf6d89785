"""Discord shards claimed through the database (``discord.shard_ids: auto``): each intake node serves a
fair, disjoint share, and a dead node's shards are taken over once its claims expire.

Every claim is a named lease (:mod:`gateway.store.lease_ops`): ``discord-shard:<i>/<n>`` is shard
``i`` of ``n``, held by one node at a time; ``discord-node:<node>`` says a node is alive, so each
can compute its fair share, ``ceil(n / live nodes)``. Every ``ttl / 3`` a node renews what it
holds, gives up what exceeds its share (the others pick it up on their next round), and claims
a free shard (one a round by default: connects are paced by Discord's identify limit; the
claims are renewed while a shard connects). The lease is taken before a shard connects and given up only after
it disconnected, so two nodes never serve one shard (Discord would send them both its events).
A node that cannot renew (database unreachable) disconnects a shard before its claim can expire.

The shard count: ``discord.shard_count`` when set, else the count the live cluster already uses,
else Discord's recommendation (``GET /gateway/bot``). A node configured for another count than
the live cluster's claims nothing until the old claims are gone: restarting the nodes one by one
with a new count moves the cluster to it without two counts ever being served at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import socket
import time
import uuid
from collections.abc import Awaitable, Collection
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

from sqlalchemy.exc import SQLAlchemyError

from agent.clock import utcnow
from agent.errors import StoreError
from gateway.errors import AdapterError
from gateway.store.lease_ops import Lease, LeaseOps

_log = logging.getLogger(__name__)

SHARD_PREFIX = "discord-shard:"
NODE_PREFIX = "discord-node:"
# A dead node's presence row is deleted this long after it expired (each start adds one).
PRESENCE_PRUNE_AFTER = timedelta(days=1)
T = TypeVar("T")
_SHARD_NAME = re.compile(r"^discord-shard:(\d+)/(\d+)$")


def shard_lease(shard_id: int, shard_count: int) -> str:
    return f"{SHARD_PREFIX}{shard_id}/{shard_count}"


def node_name() -> str:
    """This process, as lease owner: host, pid and a random part (a restarted pid is a new node)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class ShardTarget(Protocol):
    """What runs the shards: the Discord adapter in ``auto`` mode."""

    async def recommended_shard_count(self) -> int: ...

    async def run_shards(self, shard_ids: Collection[int], shard_count: int) -> frozenset[int]: ...


class ShardClaimer:
    """Claims, renews and releases this node's shards, and has ``target`` connect exactly those."""

    def __init__(
        self,
        leases: LeaseOps,
        target: ShardTarget,
        *,
        shard_count: int | None,
        ttl_seconds: float,
        claims_per_round: int = 1,
        node: str | None = None,
    ) -> None:
        self._leases = leases
        self._target = target
        self._configured = shard_count
        self._count: int | None = shard_count
        self._ttl = ttl_seconds
        self._interval = ttl_seconds / 3
        self._claims_per_round = max(1, claims_per_round)
        self.node = node or node_name()
        # shard -> until when our claim surely holds, on this process's monotonic clock (the
        # claim's expiry is the database's time, which this node's clock need not agree with)
        self._held: dict[int, float] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._blocked_by: int | None = None

    @property
    def held(self) -> frozenset[int]:
        return frozenset(self._held)

    @property
    def shard_count(self) -> int | None:
        return self._count

    async def start(self) -> None:
        """Claim a first share (so the node serves at once), then keep claiming in the background."""
        if self._task is not None:
            raise RuntimeError("ShardClaimer is already started")
        with contextlib.suppress(Exception):  # housekeeping: every start leaves one presence row
            await self._leases.lease_prune(NODE_PREFIX, utcnow() - PRESENCE_PRUNE_AFTER)
        await self._round_safely()
        self._task = asyncio.create_task(self._loop(), name="discord-shard-claims")

    async def stop(self) -> None:
        """Disconnect every shard, then release the claims and the node's presence (others take over
        at once rather than after the expiry)."""
        task, self._task = self._task, None
        self._stopping.set()
        if task is not None:
            # Let a round in progress finish (it is short), so that no claim is left half made.
            await asyncio.wait({task}, timeout=self._interval * 2)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        held, count = sorted(self._held), self._count
        with contextlib.suppress(AdapterError):
            await self._target.run_shards((), count or 1)
        self._held.clear()
        try:
            for shard_id in held:
                await self._db(self._leases.lease_release(shard_lease(shard_id, count or 1), self.node))
            await self._db(self._leases.lease_release(NODE_PREFIX + self.node, self.node))
        except (SQLAlchemyError, StoreError, OSError, TimeoutError) as exc:
            _log.warning("discord: could not release the shard claims (they expire by themselves): %s", exc)

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._interval)
            if not self._stopping.is_set():
                await self._round_safely()

    async def _round_safely(self) -> None:
        try:
            await self.claim_round()
        except (SQLAlchemyError, StoreError, OSError, AdapterError, TimeoutError) as exc:
            _log.warning("discord: shard claims not renewed: %r", exc)
            await self._drop_expiring()

    async def _drop_expiring(self) -> None:
        """Without the database, a claim cannot be proven: disconnect what may expire before the
        next round, so that no other node connects a shard this one still serves."""
        horizon = time.monotonic() + self._interval * 1.5
        expiring = {i for i, until in self._held.items() if until <= horizon}
        if expiring and self._count is not None:
            keep = set(self._held) - expiring
            # Given up before the sockets close: whoever sees them gone sees the claims gone.
            for shard_id in expiring:
                self._held.pop(shard_id, None)
            with contextlib.suppress(AdapterError):
                await self._target.run_shards(keep, self._count)
            _log.error(
                "discord: disconnected shard(s) %s: their claims could not be renewed", sorted(expiring)
            )

    async def claim_round(self) -> frozenset[int]:
        """One round: presence, renew, give up the excess, claim up to the fair share, connect.

        At most ``claims_per_round`` shards are claimed (each connect waits its turn at Discord's
        identify limit); the claims are renewed while a connect is in progress; every database call
        is bounded by the round interval.
        """
        await self._db(self._leases.lease_acquire(NODE_PREFIX + self.node, self.node, ttl_seconds=self._ttl))
        now = await self._db(self._leases.db_now())  # leases expire on the database's clock
        nodes = len([n for n in await self._db(self._leases.lease_list(NODE_PREFIX)) if n.live(now)])
        others: list[tuple[int, int]] = []  # (shard, count) claimed live by other nodes
        for lease in await self._db(self._leases.lease_list(SHARD_PREFIX)):
            shard = _parse(lease.name)
            if shard is not None and lease.live(now) and lease.owner != self.node:
                others.append(shard)
        count = await self._shard_count({n for _, n in others})
        if count is None:
            await self._release(set(self._held), self._count or 1)
            return self.held
        taken = {i for i, n in others if n == count}
        await self._renew(count)
        share = math.ceil(count / max(nodes, 1))
        if len(self._held) > share:
            await self._release(set(sorted(self._held)[share:]), count)
        free = [i for i in range(count) if i not in self._held and i not in taken]
        new: set[int] = set()
        for shard_id in free[: max(0, min(share - len(self._held), self._claims_per_round))]:
            asked = time.monotonic()
            claimed = await self._db(
                self._leases.lease_acquire(shard_lease(shard_id, count), self.node, ttl_seconds=self._ttl)
            )
            if claimed is not None:
                self._held[shard_id] = asked + self._ttl
                new.add(shard_id)
        connected = await self._connect(set(self._held), count)
        if connected - set(self._held):  # a claim lost while connecting: let that shard go now
            connected = await self._target.run_shards(set(self._held), count)
        failed = set(self._held) - connected
        if failed:  # let another node try them
            await self._release(failed, count, disconnected=True)
        return self.held

    async def _connect(self, shard_ids: set[int], count: int) -> frozenset[int]:
        """Have the target connect ``shard_ids``, renewing the claims meanwhile: a connect may wait
        out Discord's identify spacing and READY, longer than a claim may go unrenewed."""
        connect = asyncio.ensure_future(self._target.run_shards(shard_ids, count))
        try:
            while True:
                done, _ = await asyncio.wait({connect}, timeout=self._interval)
                if done:
                    return connect.result()
                await self._renew(count, disconnect=False)
        except BaseException:
            connect.cancel()  # a half-open connection is closed by the target
            await asyncio.gather(connect, return_exceptions=True)
            raise

    async def _db(self, call: Awaitable[T]) -> T:
        """A database call that cannot outlast a round: a hung connection counts as a failure."""
        return await asyncio.wait_for(call, self._interval)

    async def _shard_count(self, live_counts: set[int]) -> int | None:
        """The count to serve, or None while the live cluster serves another than ours."""
        if self._configured is None and self._count is None:
            self._count = min(live_counts) if live_counts else await self._target.recommended_shard_count()
        elif self._configured is None and live_counts and self._count not in live_counts and not self._held:
            self._count = min(live_counts)  # follow the cluster (no connection of ours to move)
        foreign = {n for n in live_counts if n != self._count}
        if foreign:
            if self._blocked_by != min(foreign):
                self._blocked_by = min(foreign)
                _log.warning(
                    "discord: the cluster serves %d shard(s), this node is set for %s: claiming none "
                    "until those claims are released or expire",
                    min(foreign),
                    self._count,
                )
            return None
        self._blocked_by = None
        return self._count

    async def _renew(self, count: int, *, disconnect: bool = True) -> None:
        lost = set()
        for shard_id in sorted(self._held):
            asked = time.monotonic()
            lease = await self._db(
                self._leases.lease_renew(shard_lease(shard_id, count), self.node, ttl_seconds=self._ttl)
            )
            if lease is None:
                lost.add(shard_id)
            else:
                self._held[shard_id] = asked + self._ttl
        if lost:  # taken by another node after our claim expired: stop serving them now
            _log.error("discord: lost the claim on shard(s) %s; disconnecting them", sorted(lost))
            for shard_id in lost:
                self._held.pop(shard_id)
            if disconnect:  # else the caller does, once the connect in progress is over
                await self._target.run_shards(set(self._held), count)

    async def _release(self, shard_ids: set[int], count: int, *, disconnected: bool = False) -> None:
        if not shard_ids:
            return
        keep = set(self._held) - shard_ids
        if not disconnected:
            await self._target.run_shards(keep, count)  # disconnect first, then let go
        for shard_id in sorted(shard_ids):
            self._held.pop(shard_id, None)
            await self._db(self._leases.lease_release(shard_lease(shard_id, count), self.node))
        _log.info("discord: gave up shard(s) %s of %d", sorted(shard_ids), count)


def _parse(name: str) -> tuple[int, int] | None:
    found = _SHARD_NAME.match(name)
    return (int(found.group(1)), int(found.group(2))) if found else None


def held_by(claims: list[Lease], now: datetime) -> dict[str, list[int]]:
    """Live shard claims by node (for the admin API and logs)."""
    owners: dict[str, list[int]] = {}
    for lease in claims:
        shard = _parse(lease.name)
        if shard is not None and lease.live(now):
            owners.setdefault(lease.owner, []).append(shard[0])
    return {owner: sorted(ids) for owner, ids in sorted(owners.items())}
