"""Scheduled resets: with an idle or daily reset policy (``sessions.idle_reset_minutes``,
``sessions.daily_reset_hour``), sessions are ended on schedule, not only when their next
message arrives.

Every ``scheduler.resets.interval_seconds`` the ``resets`` job ends each current session the
policy says is over (:func:`gateway.serving.sessions.reset_reason`), unless a turn runs or a message
waits for it. Ending keeps everything: the old conversation stays stored and searchable, and
the chat's next message starts a fresh one. No summary is carried over. With
``scheduler.resets.goodbye: notice`` the chat is told in one line; the default, ``none``,
resets silently (a group would rather not hear about it every night).
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime

from gateway.config import ResetJobSettings, SessionSettings
from gateway.outbound.delivery import target_to_dict
from gateway.platforms.base import OutboundTarget
from gateway.serving.dispatch import Gateway
from gateway.serving.sessions import reset_horizon, reset_reason
from gateway.store.records import SessionInfo
from gateway.store.repository import Store

_log = logging.getLogger(__name__)

PAGE = 200


def goodbye_text(reason: str, settings: SessionSettings) -> str:
    """The one-line notice sent with ``goodbye: notice``."""
    if reason == "daily":
        why = f"the daily reset at {settings.daily_reset_hour:02d}:00"
    else:
        why = f"{settings.idle_reset_minutes} minutes without messages"
    return (
        f"This conversation was closed after {why}. Your next message starts a new one; "
        "the old one is kept and can still be searched."
    )


class ScheduledResets:
    """The ``resets`` job over one worker's store and gateway."""

    def __init__(
        self,
        sessions: SessionSettings,
        settings: ResetJobSettings,
        *,
        timezone: str,
        store: Store,
        gateway: Gateway,
    ) -> None:
        self._sessions = sessions
        self._settings = settings
        self._timezone = timezone
        self._store = store
        self._gateway = gateway

    def describe(self) -> str:
        policies = []
        if self._sessions.idle_reset_minutes is not None:
            policies.append(f"idle {self._sessions.idle_reset_minutes} min")
        if self._sessions.daily_reset_hour is not None:
            policies.append(f"daily at {self._sessions.daily_reset_hour:02d}:00")
        return f"ends sessions by policy ({', '.join(policies)}), goodbye {self._settings.goodbye}"

    async def run(self, now: datetime) -> dict[str, int]:
        horizon = reset_horizon(now, self._sessions, timezone=self._timezone)
        if horizon is None:
            return {}
        counts: Counter[str] = Counter()
        after: tuple[datetime, str] | None = None
        while True:
            page = await self._store.idle_sessions(idle_before=horizon, limit=PAGE, after=after)
            for info in page:
                reason = reset_reason(info.last_activity_at, now, self._sessions, timezone=self._timezone)
                if reason is not None:
                    counts[await self._reset(info, reason)] += 1
            if len(page) < PAGE:
                return dict(counts)
            after = (page[-1].last_activity_at, page[-1].id)

    async def _reset(self, info: SessionInfo, reason: str) -> str:
        async with self._gateway.quiet_session(info.key) as quiet:
            if not quiet:
                return "busy"
            async with self._store.session_guard(info.key):
                current = await self._store.get_session(info.id)
                if current.ended or current.last_activity_at != info.last_activity_at:
                    return "changed"  # served or reset meanwhile
                if await self._store.inbox_open(info.key):
                    return "busy"
                await self._store.end_session(info.id, reason)
                if self._settings.goodbye == "notice":
                    target = OutboundTarget(info.platform, info.chat_id, info.thread_id, None)
                    await self._store.outbox_put(
                        session_id=info.id,
                        target=target_to_dict(target),
                        text=goodbye_text(reason, self._sessions),
                        inbox_ids=[],
                        message_id=None,
                    )
        _log.info("session reset on schedule (%s)", reason, extra={"session": info.id, "key": info.key})
        return f"reset_{reason}"
