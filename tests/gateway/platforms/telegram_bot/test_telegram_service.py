"""The Telegram adapter driven through the whole service.

Real python-telegram-bot against the fake Bot API, the real anthropic SDK against the fake
Messages API, and the SQL store on every available engine, wired by
:class:`gateway.runner.Service` exactly as ``hygieia run`` wires them; plus one real
``python -m gateway.cli run`` process.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from agent.types import ChatMessage
from gateway.config import Settings
from gateway.platforms.base import InboundMessage, PlatformAdapter
from gateway.platforms.telegram_bot.adapter import TelegramAdapter
from gateway.runner import Service, build_adapters
from gateway.splitter import join_parts, utf16_len
from gateway.store.models import inbox
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic, text_reply
from tests.fakes.telegram import FakeTelegram
from tests.gateway.conftest import MODEL, ChatResponder, user_texts
from tests.gateway.telegram_support import free_port
from tests.process_env import clean_env, hygieia_run, sigterm_and_wait

ALICE = 42
BOB = 77
GROUP = -1001234
BOT = "@hygieia_test_bot"
DM_KEY = f"telegram:dm:{ALICE}"
GROUP_KEY = f"telegram:group:{GROUP}"
LONG_REPLY = ("Long answer sentence number one goes here. 🙂 " * 250)[:8999] + "!"  # 9,000 characters
REPO = Path(__file__).resolve().parents[4]


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
def responder() -> ChatResponder:
    return ChatResponder()


@pytest.fixture
async def anthropic(responder: ChatResponder) -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(responder=responder) as fake:
        yield fake


def make_settings(
    tmp_path: Path, db_url: str, bot_api: FakeTelegram, model_api: FakeAnthropic, **overrides: Any
) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path,
        "database_url": db_url,
        "anthropic_api_key": "test",
        "anthropic_base_url": model_api.base_url,
        "model": MODEL,
        "llm": {"max_retries": 0},
        "telegram_bot_token": bot_api.token,
        "telegram_base_url": bot_api.root,
        "telegram": {"poll_timeout": 1},
        "allowed_users": [f"telegram:{ALICE}", f"telegram:{BOB}"],
        "sessions": {"turn_grace_seconds": 0.2},
        # These tests check each reply as one sendMessage; tests/gateway/outbound/test_streaming.py streams.
        "delivery": {"streaming": False},
    }
    values.update(overrides)
    return Settings(**values)


@asynccontextmanager
async def serving(
    settings: Settings, adapters: list[PlatformAdapter] | None = None
) -> AsyncIterator[Service]:
    """The service over an already migrated database, started; stopped on exit."""
    adapters = adapters if adapters is not None else build_adapters(settings, ["telegram"])
    service = await Service.build(settings, adapters, migrate=False)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


async def until(check: Callable[[], bool | Awaitable[bool]], within: float = 10.0) -> None:
    """Poll ``check`` (plain or async) until it holds."""
    deadline = time.monotonic() + within
    while True:
        result = check()
        if await result if inspect.isawaitable(result) else result:
            return
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def conversation(store: Store, key: str) -> list[ChatMessage]:
    """Every stored message of the key's current session (active or not), in order."""
    info = await store.current_session(key)
    return [] if info is None else await store.messages_after(info.id, 0)


async def delivered(store: Store, inbox_id: int = 1) -> bool:
    """Whether the reply to inbox item ``inbox_id`` is sent, every part of it."""
    record = await store.outbox_for_inbox(inbox_id)
    return record is not None and record.status == "sent"


async def inbox_rows(store: Store) -> int:
    async with store.db.engine.connect() as conn:
        return int(await conn.scalar(select(func.count()).select_from(inbox)) or 0)


# --- conversations -----------------------------------------------------------------------


async def test_a_dm_is_answered_at_send_message(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    async with serving(make_settings(tmp_path, db_url, telegram, anthropic)):
        update = telegram.push_message(ALICE, "hello there", user_id=ALICE)
        [sent] = await telegram.wait_for_sent(1, timeout=10)

    assert (sent.chat_id, sent.plain_text, sent.parse_mode) == (ALICE, "reply: hello there", "HTML")
    assert sent.reply_parameters is not None
    assert sent.reply_parameters["message_id"] == update["message"]["message_id"]
    rows = await conversation(store, DM_KEY)
    assert [(m.role, m.text.split("] ", 1)[-1]) for m in rows] == [
        ("user", "hello there"),
        ("assistant", "reply: hello there"),
    ]


async def test_an_unaddressed_group_message_is_stored_unanswered_and_seen_by_the_next_mention(
    tmp_path: Path,
    db_url: str,
    store: Store,
    telegram: FakeTelegram,
    anthropic: FakeAnthropic,
    responder: ChatResponder,
) -> None:
    async with serving(make_settings(tmp_path, db_url, telegram, anthropic)) as service:
        telegram.push_message(
            GROUP,
            "the meeting moved to Thursday",
            user_id=BOB,
            username="bob",
            first_name="Bob",
            chat_type="supergroup",
        )

        async def ambient_stored() -> bool:
            info = await store.current_session(GROUP_KEY)
            return info is not None and any(
                "the meeting moved to Thursday" in m.text for m in await store.load_active(info.id)
            )

        await until(ambient_stored)
        await asyncio.wait_for(service.gateway.wait_idle(), 5)
        assert telegram.sent == []
        assert responder.chat_bodies == []

        telegram.push_message(GROUP, f"{BOT} when is the meeting?", user_id=ALICE, chat_type="supergroup")
        [sent] = await telegram.wait_for_sent(1, timeout=10)

    assert (sent.chat_id, sent.plain_text) == (GROUP, "reply: when is the meeting?")
    [body] = responder.chat_bodies
    prompt = "\n".join(user_texts(body))
    assert "[bob, " in prompt and "the meeting moved to Thursday" in prompt
    assert prompt.index("the meeting moved to Thursday") < prompt.index("when is the meeting?")


async def test_two_forum_topics_are_two_sessions_and_each_reply_goes_to_its_topic(
    tmp_path: Path,
    db_url: str,
    store: Store,
    telegram: FakeTelegram,
    anthropic: FakeAnthropic,
    responder: ChatResponder,
) -> None:
    async with serving(make_settings(tmp_path, db_url, telegram, anthropic)):
        telegram.push_message(
            GROUP, f"{BOT} plan the trip", user_id=ALICE, chat_type="supergroup", thread_id=11
        )
        telegram.push_message(GROUP, f"{BOT} fix the bike", user_id=BOB, chat_type="supergroup", thread_id=22)
        sent = await telegram.wait_for_sent(2, timeout=10)

    assert {(s.message_thread_id, s.plain_text) for s in sent} == {
        (11, "reply: plan the trip"),
        (22, "reply: fix the bike"),
    }
    trip = await store.current_session(f"{GROUP_KEY}:thread:11")
    bike = await store.current_session(f"{GROUP_KEY}:thread:22")
    assert trip is not None and bike is not None and trip.id != bike.id
    trip_texts = " ".join(m.text for m in await store.messages_after(trip.id, 0))
    assert "plan the trip" in trip_texts and "bike" not in trip_texts
    for body in responder.chat_bodies:  # neither topic's prompt carries the other topic
        prompt = "\n".join(user_texts(body))
        assert ("plan the trip" in prompt) != ("fix the bike" in prompt)


# --- sending -----------------------------------------------------------------------------


async def test_a_9000_character_reply_arrives_as_three_messages_within_the_limit(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    anthropic.script(text_reply(LONG_REPLY))
    async with serving(make_settings(tmp_path, db_url, telegram, anthropic)):
        telegram.push_message(ALICE, "tell me everything", user_id=ALICE)
        await until(lambda: delivered(store))

    sent = telegram.sent
    assert len(sent) == 3
    assert all(utf16_len(s.plain_text) <= 4096 for s in sent)
    assert join_parts([s.plain_text for s in sent]) == LONG_REPLY
    assert sent[0].reply_parameters is not None
    assert [s.reply_parameters for s in sent[1:]] == [None, None]


async def test_a_reply_telegram_cannot_parse_is_resent_as_plain_text_and_delivered(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    telegram.fail_next("sendMessage", 400)  # "can't parse entities"
    async with serving(make_settings(tmp_path, db_url, telegram, anthropic)):
        telegram.push_message(ALICE, "a < b & c", user_id=ALICE)
        await until(lambda: delivered(store))

    [sent] = telegram.sent
    assert [c.status for c in telegram.calls("sendMessage")] == [400, 200]
    assert (sent.parse_mode, sent.text) == (None, "reply: a < b & c")


async def test_a_429_on_send_is_waited_out_and_every_part_arrives_once(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    anthropic.script(text_reply(LONG_REPLY))
    telegram.fail_next("sendMessage", 429, retry_after=1)
    async with serving(make_settings(tmp_path, db_url, telegram, anthropic)):
        telegram.push_message(ALICE, "tell me everything", user_id=ALICE)
        await until(lambda: delivered(store), within=15)

    calls = telegram.calls("sendMessage")
    assert [c.status for c in calls] == [429, 200, 200, 200]
    assert calls[1].at - calls[0].at >= 1.0  # retry_after honoured
    assert join_parts([s.plain_text for s in telegram.sent]) == LONG_REPLY


# --- intake guarantees -------------------------------------------------------------------


async def test_a_webhook_post_with_a_wrong_secret_gets_403_and_stores_nothing(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    port = free_port()
    webhook = {
        "mode": "webhook",
        "webhook_url": f"http://127.0.0.1:{port}/telegram-hook",
        "webhook_port": port,
        "webhook_secret": "s3cret-token",
    }
    settings = make_settings(tmp_path, db_url, telegram, anthropic, telegram=webhook)
    async with serving(settings):
        telegram.push_message(ALICE, "forged", user_id=ALICE)
        assert await telegram.deliver_webhook(secret_token="wrong") == [403]
        assert await inbox_rows(store) == 0

        assert await telegram.deliver_webhook() == [200]  # the genuine delivery of the same update
        [sent] = await telegram.wait_for_sent(1, timeout=10)
    assert sent.plain_text == "reply: forged"
    assert await inbox_rows(store) == 1


async def test_a_stop_mid_turn_then_a_restart_answers_the_message_exactly_once(
    tmp_path: Path,
    db_url: str,
    store: Store,
    telegram: FakeTelegram,
    anthropic: FakeAnthropic,
    responder: ChatResponder,
) -> None:
    settings = make_settings(tmp_path, db_url, telegram, anthropic)
    responder.chat_delay = 30  # the model is slow: the turn is still running at stop
    async with serving(settings):
        update_id = telegram.push_message(ALICE, "remember the milk", user_id=ALICE)["update_id"]
        await until(lambda: bool(responder.chat_bodies))
        await telegram.wait_for_acked(update_id + 1)  # committed to the inbox, so confirmed
    assert telegram.sent == []
    assert (await store.inbox_get(1)).status == "pending"  # handed back at stop, not left leased

    responder.chat_delay = 0
    async with serving(settings):
        await until(lambda: delivered(store))

    [sent] = telegram.sent
    assert sent.plain_text == "reply: remember the milk"
    assert (await store.inbox_get(1)).status == "done"
    rows = await conversation(store, DM_KEY)
    assert [m.role for m in rows] == ["user", "assistant"]


async def test_an_update_committed_but_not_confirmed_is_redelivered_and_answered_once(
    tmp_path: Path,
    db_url: str,
    store: Store,
    telegram: FakeTelegram,
    anthropic: FakeAnthropic,
    responder: ChatResponder,
) -> None:
    settings = make_settings(tmp_path, db_url, telegram, anthropic)
    adapter = TelegramAdapter(
        telegram.token, base_url=telegram.root, settings=settings.telegram, stop_grace=0.3
    )
    service = await Service.build(settings, [adapter], migrate=False)
    committed = asyncio.Event()
    intake = service.gateway.intake

    async def commit_then_hang(message: InboundMessage) -> None:
        await intake(message)  # the real intake: the inbox row is committed
        committed.set()
        await asyncio.Event().wait()  # ...and the process stops before Telegram hears of it

    service.gateway.intake = commit_then_hang  # type: ignore[method-assign]  # what start() hands the adapter
    await service.start()
    try:
        update_id = telegram.push_message(ALICE, "only once please", user_id=ALICE)["update_id"]
        await asyncio.wait_for(committed.wait(), 10)
        await telegram.wait_for_sent(1, timeout=10)  # the committed message is served meanwhile
    finally:
        await service.stop()
    assert update_id in telegram.pending_update_ids  # never confirmed

    async with serving(settings) as again:
        await telegram.wait_for_acked(update_id + 1)  # redelivered, found in the inbox, confirmed
        await asyncio.wait_for(again.gateway.wait_idle(), 5)
        await again.delivery.flush()

    assert [s.plain_text for s in telegram.sent] == ["reply: only once please"]
    assert len(responder.chat_bodies) == 1
    assert await inbox_rows(store) == 1
    assert [m.role for m in await conversation(store, DM_KEY)] == ["user", "assistant"]


# --- the real command ----------------------------------------------------------------------


async def test_hygieia_run_answers_a_telegram_dm_and_exits_0_on_sigterm(
    tmp_path: Path, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    env = clean_env()
    env.update(
        {
            "TELEGRAM_BOT_TOKEN": telegram.token,
            "HYGIEIA_TELEGRAM_BASE_URL": telegram.root,
            "ANTHROPIC_API_KEY": "test",
            "ANTHROPIC_BASE_URL": anthropic.base_url,
            "HYGIEIA_ALLOWED_USERS": f"telegram:{ALICE}",
            "HYGIEIA_DATA_DIR": str(tmp_path),
            "HYGIEIA_MODEL": MODEL,
            "HYGIEIA_TELEGRAM__POLL_TIMEOUT": "1",
            "PYTHONPATH": str(REPO),
        }
    )
    async with hygieia_run(env, tmp_path) as proc:
        telegram.push_message(ALICE, "are you there?", user_id=ALICE)
        [sent] = await telegram.wait_for_sent(1, timeout=30)
        stderr = await sigterm_and_wait(proc)

    assert proc.returncode == 0, stderr
    assert (sent.chat_id, sent.plain_text) == (ALICE, "reply: are you there?")
    assert (tmp_path / "hygieia.db").is_file()
