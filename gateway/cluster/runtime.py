"""The cluster parts of one ``hygieia run`` on PostgreSQL, with one start/stop.

- send-only adapters (workers deliver any reply; no polling, no gateway connection);
- the intake election (roles ``all`` and ``intake``);
- the node heartbeat, the wake-ups (``LISTEN/NOTIFY``) and the slow inbox poll under them (workers
  pick up what another process received);
- optionally this process's own ``/metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from gateway.cluster.election import ClusterState, Election, IntakeSlot
from gateway.cluster.metrics import MetricsServer
from gateway.cluster.node import NodeHeartbeat
from gateway.cluster.roles import Role, runs_intake, runs_worker
from gateway.config import ClusterSettings
from gateway.platforms.base import InboundHandler, PlatformAdapter
from gateway.store.repository import Store
from gateway.store.wakeups import COMMAND_CHANNEL, INBOX_CHANNEL, OUTBOX_CHANNEL, Listener, parse_command

_log = logging.getLogger(__name__)


class ClusterRuntime:
    """Built by the runner when the database is PostgreSQL; see the module docstring."""

    def __init__(
        self,
        store: Store,
        settings: ClusterSettings,
        state: ClusterState,
        *,
        senders: dict[str, PlatformAdapter],
        slots: list[IntakeSlot],
        handler: InboundHandler,
        poll_inbox: Callable[[], Awaitable[None]],
        wake: Callable[[str], None] | None = None,
        deliver_now: Callable[[], None] | None = None,
        cancel_turn: Callable[[str, str], None] | None = None,
    ) -> None:
        self.state = state
        self._settings = settings
        self._role: Role = state.role  # type: ignore[assignment]  # set from a checked Role
        self.senders = senders
        self.election = Election(
            store,
            slots if runs_intake(self._role) else [],
            handler,
            state,
            ttl_seconds=settings.intake_lease_seconds,
        )
        self._heartbeat = NodeHeartbeat(
            store, state.role, state.worker_id, ttl_seconds=max(settings.intake_lease_seconds, 6.0)
        )
        self._poll_inbox = poll_inbox
        self._poller: asyncio.Task[None] | None = None
        self._gap: set[asyncio.Task[None]] = set()
        self.listener: Listener | None = None
        if wake is not None and deliver_now is not None:

            def caught_up() -> None:
                deliver_now()
                task = asyncio.create_task(self._poll_once(), name="inbox catch-up")
                self._gap.add(task)
                task.add_done_callback(self._gap.discard)

            self.listener = Listener(
                store.db.url,
                {
                    INBOX_CHANNEL: wake,
                    OUTBOX_CHANNEL: lambda _payload: deliver_now(),
                    COMMAND_CHANNEL: lambda payload: _command(cancel_turn, payload),
                },
                on_gap=caught_up,
            )
        self.metrics: MetricsServer | None = None

    def intake(self, platform: str) -> PlatformAdapter | None:
        return self.election.adapter(platform)

    async def start_senders(self) -> None:
        """Before delivery starts: a worker can send as soon as it serves."""
        for adapter in self.senders.values():
            await adapter.start_sending()

    async def start(self) -> None:
        await self._heartbeat.start()
        if self._settings.metrics_port is not None:
            self.metrics = MetricsServer(self.state, self._settings.metrics_host, self._settings.metrics_port)
            self.metrics.start()
        if runs_worker(self._role):
            if self.listener is not None:
                self.listener.start()
            self._poller = asyncio.create_task(self._poll(), name="inbox poll")
        await self.election.start()

    async def stop_intake(self) -> None:
        """First on the way out: the standby takes over at once (the lease is released)."""
        await self.election.stop()
        if self.listener is not None:
            await self.listener.stop()
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
            self._poller = None

    async def stop(self) -> None:
        """Last on the way out: the senders (after delivery's final round) and the heartbeat."""
        for adapter in self.senders.values():
            try:
                await adapter.stop()
            except Exception:  # one adapter failing to stop must not keep the others open
                _log.exception("stopping the %s sender failed", adapter.name)
        await self._heartbeat.stop()
        if self.metrics is not None:
            with contextlib.suppress(Exception):
                self.metrics.stop()

    async def _poll(self) -> None:
        """Messages another process received: this worker may serve them (the claim decides).
        The safety net under the wake-ups: slow, and catches anything a lost notification missed."""
        while True:
            await asyncio.sleep(self._settings.inbox_poll_seconds)
            await self._poll_once()

    async def _poll_once(self) -> None:
        try:
            await self._poll_inbox()
        except Exception:  # a missed poll is not fatal; the next one may pass
            _log.warning("inbox poll failed", exc_info=True)


def _command(cancel_turn: Callable[[str, str], None] | None, payload: str) -> None:
    parsed = parse_command(payload)
    if parsed is not None and cancel_turn is not None:
        action, key = parsed
        cancel_turn(key, action)
