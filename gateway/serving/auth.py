"""Who may talk to the bot and who may run admin commands.

Default deny (``HYGIEIA_ALLOWED_USERS`` / ``HYGIEIA_ALLOW_ALL_USERS``). The console user is
the local operator: always allowed, always admin. An API user (the name of an API key) is allowed:
the key was checked at the door, and holding one is the permission; never an admin. A refused
user hears one short, polite sentence at most once per hour; nothing about them is stored beyond
an audit line.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.config import Settings

LOCAL_PLATFORM = "console"
KEYED_PLATFORMS = frozenset({"api"})
"""Platforms whose users proved who they are with a configured key before their message came in."""
REFUSAL_TEXT = "Sorry, I'm a private assistant and can't talk with you here. Ask my owner for access."
REFUSAL_INTERVAL_SECONDS = 3600.0


class Authorizer:
    """Allow-list checks plus the once-an-hour refusal throttle (kept in memory)."""

    def __init__(self, settings: Settings, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._settings = settings
        self._clock = clock
        self._last_refusal: dict[str, float] = {}

    def is_allowed(self, platform: str, user_id: str) -> bool:
        """Default deny: the local operator, listed users, or everyone when the bot is opened."""
        if platform == LOCAL_PLATFORM or platform in KEYED_PLATFORMS or self._settings.allow_all_users:
            return True
        return f"{platform}:{user_id}" in self._settings.allowed_users

    def is_admin(self, platform: str, user_id: str) -> bool:
        return platform == LOCAL_PLATFORM or f"{platform}:{user_id}" in self._settings.admin_users

    def should_notify_refusal(self, platform: str, user_id: str) -> bool:
        """True at most once per hour per user: the caller then sends :data:`REFUSAL_TEXT`."""
        who = f"{platform}:{user_id}"
        now = self._clock()
        last = self._last_refusal.get(who)
        if last is not None and now - last < REFUSAL_INTERVAL_SECONDS:
            return False
        self._last_refusal[who] = now
        if len(self._last_refusal) > 10_000:
            self._forget_old(now)
        return True

    def _forget_old(self, now: float) -> None:
        stale = [who for who, at in self._last_refusal.items() if now - at >= REFUSAL_INTERVAL_SECONDS]
        for who in stale:
            del self._last_refusal[who]
