"""A heartbeat lease per process (``node:<role>:<worker id>``): the cluster's node registry.

Nodes are derived from leases rather than a table of their own: a live ``node:`` lease is a
live process, its expiry says when it was last heard from, and the intake leases and inbox
claims name the same worker id, so the admin view joins them (see
:mod:`gateway.cluster.view`). Heartbeats expired for longer than ``PRUNE_AFTER`` are deleted
at start so the table does not grow with every restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from agent.clock import utcnow
from gateway.cluster.roles import NODE_LEASE_PREFIX, node_lease
from gateway.store.repository import Store

_log = logging.getLogger(__name__)

PRUNE_AFTER = timedelta(days=1)


class NodeHeartbeat:
    """Renews this process's node lease every third of ``ttl_seconds``; released on stop."""

    def __init__(self, store: Store, role: str, worker_id: str, *, ttl_seconds: float) -> None:
        self._store = store
        self._name = node_lease(role, worker_id)
        self._owner = worker_id
        self._ttl = ttl_seconds
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        with contextlib.suppress(Exception):  # housekeeping only
            await self._store.lease_prune(NODE_LEASE_PREFIX, utcnow() - PRUNE_AFTER)
        await self._store.lease_acquire(self._name, self._owner, ttl_seconds=self._ttl)
        self._task = asyncio.create_task(self._beat(), name="node heartbeat")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        with contextlib.suppress(Exception):
            await self._store.lease_release(self._name, self._owner)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self._ttl / 3)
            try:
                await self._store.lease_acquire(self._name, self._owner, ttl_seconds=self._ttl)
            except Exception:  # a missed beat is not fatal; the next one may pass
                _log.warning("node heartbeat failed", exc_info=True)
