"""Session keys, reset policies and per-session locking.

A session key names one conversation on one platform: ``telegram:dm:42``,
``telegram:group:-100:thread:7``, ``console:alice``. The store maps a key to its
current (not ended) session; ``/new`` or a reset policy ends it and the next message
starts a fresh one under the same key.

Locking: in one process an :class:`asyncio.Lock` per key serializes turns. Across
several workers on one PostgreSQL database the inbox lease is the session's lease: a
worker claims a session's pending items with ``inbox_claim(session_key=...)``, which
claims nothing while another worker holds a live lease on an item of that session
(claims per key are serialized by an advisory lock). The holder renews its leases while
its turn runs; a worker that dies stops renewing, and its items become claimable again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from agent.clock import Clock, utcnow
from agent.types import AgentSession
from gateway.config import ChatOverride, SessionSettings
from gateway.platforms.base import InboundMessage
from gateway.serving.inbound import InboxItem
from gateway.serving.overrides import ChatSettings, resolve
from gateway.store.override_ops import AdminOverride
from gateway.store.records import SessionInfo
from gateway.store.repository import Store
from gateway.store.session_ops import FrozenSettings, SessionOpening

_log = logging.getLogger(__name__)


def session_key(msg: InboundMessage, settings: SessionSettings) -> str:
    """The key of the conversation ``msg`` belongs to."""
    if msg.platform in ("console", "api"):
        # One conversation per chat id: the console's OS user; the API's ``<key name>:<conversation>``.
        return f"{msg.platform}:{msg.chat_id}"
    if msg.is_dm:
        key = f"{msg.platform}:dm:{msg.chat_id}"
    else:
        key = f"{msg.platform}:group:{msg.chat_id}"
        if settings.group_mode == "per_user":
            key += f":user:{msg.user_id}"
    if msg.thread_id:
        key += f":thread:{msg.thread_id}"
    return key


def reset_reason(
    last_activity: datetime | None,
    now: datetime,
    settings: SessionSettings,
    *,
    timezone: str = "UTC",
) -> str | None:
    """Why the session last active at ``last_activity`` must end before serving at ``now``.

    ``None`` (the default, both policies off) keeps the session: sessions live for months.
    """
    if last_activity is None:
        return None
    if settings.idle_reset_minutes is not None and now - last_activity >= timedelta(
        minutes=settings.idle_reset_minutes
    ):
        return "idle"
    if settings.daily_reset_hour is not None:
        boundary = _last_daily_boundary(now, settings.daily_reset_hour, ZoneInfo(timezone))
        if last_activity < boundary <= now:
            return "daily"
    return None


def reset_horizon(now: datetime, settings: SessionSettings, *, timezone: str = "UTC") -> datetime | None:
    """The latest activity time that may call for a reset at ``now`` (``None``: no policy is on).

    A session last active after it is kept by every policy; one active at or before it may be
    reset (:func:`reset_reason` decides).
    """
    horizons: list[datetime] = []
    if settings.idle_reset_minutes is not None:
        horizons.append(now - timedelta(minutes=settings.idle_reset_minutes))
    if settings.daily_reset_hour is not None:
        horizons.append(_last_daily_boundary(now, settings.daily_reset_hour, ZoneInfo(timezone)))
    return max(horizons) if horizons else None


def _last_daily_boundary(now: datetime, hour: int, tz: ZoneInfo) -> datetime:
    local = now.astimezone(tz)
    boundary = local.replace(hour=hour, minute=0, second=0, microsecond=0)
    if boundary > local:
        boundary -= timedelta(days=1)
    return boundary


class SessionLocks:
    """One :class:`asyncio.Lock` per session key; entries vanish when nobody holds or waits."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[key] -= 1
            if self._users[key] == 0:
                del self._users[key]
                del self._locks[key]

    def locked(self, key: str) -> bool:
        lock = self._locks.get(key)
        return lock is not None and lock.locked()


class SessionDirectory:
    """Maps a key to its current session, applying the reset policy, and builds the agent's view of it."""

    def __init__(
        self,
        store: Store,
        settings: SessionSettings,
        *,
        model: str,
        context_window: Callable[[str], int],
        budget: Callable[[str], int | None] | None = None,
        timezone: str = "UTC",
        clock: Clock = utcnow,
        overrides: Sequence[ChatOverride] = (),
    ) -> None:
        self._store = store
        self._settings = settings
        self._model = model
        self._overrides = tuple(overrides)
        self._window = context_window
        self._budget = budget
        self._timezone = timezone
        self._clock = clock

    async def current(self, key: str, item: InboxItem, *, known: SessionInfo | None = None) -> SessionInfo:
        """The session ``item`` belongs to; an idle or daily reset (off by default) ends the old one first.

        ``known``: the key's current session as the caller has just read it (the inbox claim does,
        in its own transaction), so it is not looked up again.
        """
        info = known or await self._open(key, item)
        reason = reset_reason(info.last_activity_at, self._clock(), self._settings, timezone=self._timezone)
        if reason is None:
            return info
        await self._store.end_session(info.id, reason)
        _log.info("session reset (%s)", reason, extra={"session": info.id, "key": key})
        return await self._open(key, item)

    def opening(self, key: str, item: InboxItem) -> SessionOpening:
        """How ``key``'s session opens if it has none: the chat's settings resolved then, with the
        admin's overrides read in the same transaction, and frozen for the session's life."""

        def settle(admin: list[AdminOverride]) -> FrozenSettings:
            chat = self._settled(item.platform, item.chat_id, item.thread_id, admin)
            return chat.system_prompt, chat.model, chat.frozen()

        return SessionOpening(key, item.platform, item.chat_id, item.thread_id, item.user_id, settle)

    def _settled(
        self, platform: str, chat_id: str, thread_id: str | None, admin: Sequence[AdminOverride]
    ) -> ChatSettings:
        return resolve(
            self._overrides,
            platform,
            chat_id,
            thread_id,
            system_prompt=self._settings.system_prompt,
            model=self._model,
            admin=admin,
        )

    async def next_model(self, info: SessionInfo) -> str:
        """The model the next session of ``info``'s chat starts with (the settings and overrides now)."""
        admin = await self._store.admin_overrides_for(info.platform, info.chat_id)
        return self._settled(info.platform, info.chat_id, info.thread_id, admin).model

    async def _open(self, key: str, item: InboxItem) -> SessionInfo:
        """The key's current session (frozen: what applies now waits for the next session), or a
        new one, in one transaction."""
        return await self._store.open_session(self.opening(key, item))

    def reset_due(self, info: SessionInfo) -> bool:
        """Whether :meth:`current` would end ``info`` (an idle or daily reset) before serving it."""
        return (
            reset_reason(info.last_activity_at, self._clock(), self._settings, timezone=self._timezone)
            is not None
        )

    def agent_session(self, info: SessionInfo) -> AgentSession:
        configured = self._budget(info.model) if self._budget is not None else None
        return agent_session_of(info, window=self._window(info.model), budget=configured)


def agent_session_of(info: SessionInfo, *, window: int, budget: int | None) -> AgentSession:
    """The agent's view of ``info``: the model's ``window`` and the context budget, the chat's
    own (frozen when the session began) before the configured ``budget`` of its model."""
    frozen = info.chat_overrides or {}
    own = frozen.get("budget_tokens")
    summary_model = frozen.get("summary_model")
    return AgentSession(
        id=info.id,
        system_prompt=info.system_prompt,
        model=info.model,
        context_window=window,
        key=info.key,
        platform=info.platform,
        budget_tokens=own if isinstance(own, int) else budget,
        summary_model=summary_model if isinstance(summary_model, str) else None,
    )
