"""Session keys, reset policies (off by default) and per-session locking."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from gateway.config import SessionSettings
from gateway.serving.sessions import SessionLocks, reset_reason, session_key
from tests.gateway.conftest import inbound

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_a_dm_is_keyed_by_its_chat() -> None:
    assert session_key(inbound("hi", chat_id="42"), SessionSettings()) == "test:dm:42"


def test_a_group_is_shared_by_default() -> None:
    a = inbound("hi", chat_id="-100", chat_type="group", user_id="1")
    b = inbound("hi", chat_id="-100", chat_type="group", user_id="2")
    assert session_key(a, SessionSettings()) == session_key(b, SessionSettings()) == "test:group:-100"


def test_a_group_can_be_per_user() -> None:
    msg = inbound("hi", chat_id="-100", chat_type="group", user_id="7")
    assert session_key(msg, SessionSettings(group_mode="per_user")) == "test:group:-100:user:7"


def test_channels_are_keyed_like_groups() -> None:
    assert session_key(inbound("hi", chat_id="5", chat_type="channel"), SessionSettings()) == "test:group:5"


def test_a_thread_or_topic_is_its_own_session() -> None:
    msg = inbound("hi", chat_id="-100", chat_type="group", thread_id="12")
    assert session_key(msg, SessionSettings()) == "test:group:-100:thread:12"


def test_the_console_is_one_chat_per_os_user() -> None:
    from gateway.platforms.base import InboundMessage

    msg = InboundMessage(platform="console", chat_id="alice", user_id="alice", text="hi")
    assert session_key(msg, SessionSettings()) == "console:alice"


def test_sessions_never_reset_by_default() -> None:
    assert reset_reason(NOW - timedelta(days=400), NOW, SessionSettings()) is None


def test_an_idle_reset_ends_a_quiet_session() -> None:
    settings = SessionSettings(idle_reset_minutes=60)
    assert reset_reason(NOW - timedelta(minutes=61), NOW, settings) == "idle"
    assert reset_reason(NOW - timedelta(minutes=59), NOW, settings) is None


def test_a_daily_reset_ends_a_session_last_active_before_the_hour() -> None:
    settings = SessionSettings(daily_reset_hour=4)
    assert reset_reason(datetime(2026, 11, 29, 3, 59, tzinfo=UTC), NOW, settings) == "daily"
    assert reset_reason(datetime(2026, 11, 29, 4, 1, tzinfo=UTC), NOW, settings) is None


def test_the_daily_hour_is_in_the_configured_timezone() -> None:
    settings = SessionSettings(daily_reset_hour=4)
    # 04:00 in Tokyo is 19:00 UTC the day before.
    last = datetime(2026, 11, 28, 18, 0, tzinfo=UTC)
    assert reset_reason(last, NOW, settings, timezone="Asia/Tokyo") == "daily"
    assert (
        reset_reason(datetime(2026, 11, 28, 19, 30, tzinfo=UTC), NOW, settings, timezone="Asia/Tokyo") is None
    )


async def test_one_session_is_served_by_one_turn_at_a_time() -> None:
    locks = SessionLocks()
    order: list[str] = []

    async def turn(key: str, name: str) -> None:
        async with locks.hold(key):
            order.append(f"{name} in")
            await asyncio.sleep(0.05)
            order.append(f"{name} out")

    await asyncio.gather(turn("k", "a"), turn("k", "b"), turn("other", "c"))

    assert order.index("a out") < order.index("b in")
    assert order.index("c in") < order.index("a out")
    assert not locks.locked("k")
