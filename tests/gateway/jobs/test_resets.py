"""Scheduled resets: an idle or daily reset policy ends sessions on schedule, not only on the next message."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.config import ResetJobSettings
from gateway.jobs.resets import ScheduledResets
from gateway.store.records import SessionInfo
from gateway.store.repository import Store
from tests.gateway.conftest import Rig, gateway_rig

NOW = datetime.now(UTC).replace(microsecond=0)


async def chat(rig: Rig, name: str, last_active: datetime) -> SessionInfo:
    info = await rig.store.get_or_create_session(
        f"test:dm:{name}", platform="test", chat_id=name, system_prompt="s", model=rig.settings.model
    )
    await rig.store.touch_session(info.id, last_active)
    return info


def resets_of(rig: Rig, **settings: Any) -> ScheduledResets:
    return ScheduledResets(
        rig.settings.sessions,
        ResetJobSettings(**settings),
        timezone="UTC",
        store=rig.store,
        gateway=rig.gateway,
    )


async def ended(store: Store, info: SessionInfo) -> str | None:
    return (await store.get_session(info.id)).end_reason


async def test_an_idle_session_is_ended_on_schedule_and_a_recent_or_busy_one_is_kept(store: Store) -> None:
    async with gateway_rig(store, sessions={"idle_reset_minutes": 60}) as rig:
        idle = await chat(rig, "idle", NOW - timedelta(hours=2))
        recent = await chat(rig, "recent", NOW - timedelta(minutes=10))
        waiting = await chat(rig, "waiting", NOW - timedelta(hours=2))
        await rig.store.inbox_put(
            platform="test",
            chat_id="waiting",
            platform_message_id="w1",
            session_key=waiting.key,
            payload={"text": "hi"},
            addressed=True,
        )

        report = await resets_of(rig).run(NOW)

        assert report == {"reset_idle": 1}
        assert await ended(store, idle) == "idle"
        assert await ended(store, recent) is None and await ended(store, waiting) is None
        assert await store.outbox_due(NOW + timedelta(minutes=1)) == []  # goodbye: none by default


async def test_the_daily_reset_ends_yesterdays_sessions_after_the_reset_hour(store: Store) -> None:
    reset_hour = (NOW - timedelta(hours=1)).hour  # the boundary passed an hour ago
    async with gateway_rig(store, sessions={"daily_reset_hour": reset_hour}) as rig:
        before = await chat(rig, "before", NOW - timedelta(hours=3))
        after = await chat(rig, "after", NOW - timedelta(minutes=30))

        report = await resets_of(rig).run(NOW)

        assert report == {"reset_daily": 1}
        assert await ended(store, before) == "daily" and await ended(store, after) is None


async def test_goodbye_notice_tells_the_chat_in_one_line(store: Store) -> None:
    async with gateway_rig(store, sessions={"idle_reset_minutes": 60}) as rig:
        await chat(rig, "idle", NOW - timedelta(hours=2))

        await resets_of(rig, goodbye="notice").run(NOW)
        await rig.delivery.flush()

        [sent] = rig.adapter.sent
        assert sent.target.chat_id == "idle" and sent.target.reply_to_message_id is None
        assert sent.text.startswith("This conversation was closed after 60 minutes without messages.")


async def test_the_next_message_after_a_scheduled_reset_starts_a_new_conversation(store: Store) -> None:
    async with gateway_rig(store, sessions={"idle_reset_minutes": 60}) as rig:
        old = await chat(rig, "chat-1", NOW - timedelta(hours=2))
        await resets_of(rig).run(NOW)

        await rig.say("hello again")
        await rig.settle()

        current = await store.current_session("test:dm:chat-1")
        assert current is not None and current.id != old.id
        assert rig.adapter.texts == ["reply: hello again"]


async def test_without_a_reset_policy_nothing_is_ever_reset(store: Store) -> None:
    async with gateway_rig(store) as rig:
        ancient = await chat(rig, "ancient", NOW - timedelta(days=400))
        assert await resets_of(rig).run(NOW) == {}
        assert await ended(store, ancient) is None
