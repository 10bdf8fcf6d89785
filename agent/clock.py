"""The one clock shape: every component that reads the time takes a :data:`Clock`, so tests can steer it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]
"""A source of the current time; always returns an aware UTC ``datetime``."""


def utcnow() -> datetime:
    """The current time, timezone-aware UTC (storage is always UTC)."""
    return datetime.now(UTC)
