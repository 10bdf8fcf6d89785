"""Group manners through the whole service on Telegram and Discord: who gets an answer in a group.

A reply to the bot is a mention; a message naming only another bot is not for us; another bot's
message is answered only with ``sessions.answer_bots``, and then only so many in a row.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from gateway.config import Settings
from gateway.platforms.base import PlatformAdapter
from gateway.runner import Service, build_adapters
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import FakeTelegram
from tests.gateway.conftest import MODEL, ChatResponder
from tests.gateway.discord_support import USER, in_guild, make_adapter
from tests.process_env import clean_env, hygieia_run, sigterm_and_wait

GROUP = -1001234
ALICE = 42
OTHER_BOT = 555
BOT = "@hygieia_test_bot"
DISCORD_BOT = 9_000_000_000_000_000_001
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def responder() -> ChatResponder:
    return ChatResponder()


@pytest.fixture
async def anthropic(responder: ChatResponder) -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(responder=responder) as fake:
        yield fake


def settings_for(tmp_path: Path, db_url: str, model_api: FakeAnthropic, **values: Any) -> Settings:
    base: dict[str, Any] = {
        "data_dir": tmp_path,
        "database_url": db_url,
        "anthropic_api_key": "test",
        "anthropic_base_url": model_api.base_url,
        "model": MODEL,
        "llm": {"max_retries": 0},
        "delivery": {"streaming": False},
    }
    sessions = {"turn_grace_seconds": 0.2, **values.pop("sessions", {})}
    return Settings(**{**base, **values, "sessions": sessions})


@asynccontextmanager
async def serving(settings: Settings, adapters: list[PlatformAdapter]) -> AsyncIterator[Service]:
    service = await Service.build(settings, adapters, migrate=False)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


@asynccontextmanager
async def telegram_service(
    tmp_path: Path, db_url: str, model_api: FakeAnthropic, **values: Any
) -> AsyncIterator[tuple[FakeTelegram, Service]]:
    async with FakeTelegram() as fake:
        settings = settings_for(
            tmp_path,
            db_url,
            model_api,
            telegram_bot_token=fake.token,
            telegram_base_url=fake.root,
            telegram={"poll_timeout": 1},
            allowed_users=[f"telegram:{ALICE}", f"telegram:{OTHER_BOT}"],
            **values,
        )
        async with serving(settings, build_adapters(settings, ["telegram"])) as service:
            yield fake, service


@asynccontextmanager
async def discord_service(
    tmp_path: Path, db_url: str, model_api: FakeAnthropic, **values: Any
) -> AsyncIterator[tuple[FakeDiscord, Service]]:
    async with FakeDiscord() as fake:
        settings = settings_for(
            tmp_path,
            db_url,
            model_api,
            discord_bot_token=fake.token,
            discord_api_base=fake.api_base,
            discord_gateway_url=fake.gateway_url,
            allowed_users=[f"discord:{USER}", f"discord:{DISCORD_BOT}"],
            **values,
        )
        async with serving(settings, [make_adapter(fake, slash_commands=False)]) as service:
            yield fake, service


async def settled(service: Service) -> None:
    await asyncio.sleep(0.3)  # intake of what was pushed
    await asyncio.wait_for(service.gateway.wait_idle(), 10)


def tg_group(fake: FakeTelegram, text: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("user_id", ALICE)
    return fake.push_message(GROUP, text, chat_type="supergroup", **kw)


def tg_bot(fake: FakeTelegram, text: str, **kw: Any) -> dict[str, Any]:
    return tg_group(
        fake, text, user_id=OTHER_BOT, username="other_bot", first_name="Other", is_bot=True, **kw
    )


def dc_bot(fake: FakeDiscord, text: str, **kw: Any) -> dict[str, Any]:
    return in_guild(fake, text, author_id=DISCORD_BOT, author_name="otherbot", author_is_bot=True, **kw)


# --- Telegram --------------------------------------------------------------------------------


async def test_telegram_a_reply_to_the_bot_is_answered_without_a_mention(
    tmp_path: Path, db_url: str, store: Store, anthropic: FakeAnthropic
) -> None:
    async with telegram_service(tmp_path, db_url, anthropic) as (fake, _):
        tg_group(fake, f"{BOT} hello")
        await fake.wait_for_sent(1, timeout=10)
        tg_group(fake, "and then?", reply_to_bot=True)
        sent = await fake.wait_for_sent(2, timeout=10)
    assert sent[1].plain_text == "reply: and then?"


async def test_telegram_a_message_naming_only_another_bot_is_not_answered(
    tmp_path: Path, db_url: str, store: Store, anthropic: FakeAnthropic, responder: ChatResponder
) -> None:
    async with telegram_service(tmp_path, db_url, anthropic) as (fake, service):
        tg_group(fake, f"{BOT} hello")
        await fake.wait_for_sent(1, timeout=10)
        tg_group(fake, "@other_bot what is the weather?")
        tg_group(fake, "@other_bot and what do you think?", reply_to_bot=True)
        await settled(service)
    assert len(fake.sent) == 1
    assert len(responder.chat_bodies) == 1


async def test_telegram_another_bots_message_is_not_answered_by_default(
    tmp_path: Path, db_url: str, store: Store, anthropic: FakeAnthropic, responder: ChatResponder
) -> None:
    async with telegram_service(tmp_path, db_url, anthropic) as (fake, service):
        tg_bot(fake, f"{BOT} beep, answer me")
        await settled(service)
        assert fake.sent == [] and responder.chat_bodies == []
        tg_group(fake, f"{BOT} did the bot say something?")
        [sent] = await fake.wait_for_sent(1, timeout=10)
    assert sent.plain_text == "reply: did the bot say something?"
    assert "beep, answer me" in str(responder.chat_bodies[0]["messages"])  # kept as context


async def test_telegram_a_bot_loop_is_cut_after_the_configured_number_of_replies(
    tmp_path: Path, db_url: str, store: Store, anthropic: FakeAnthropic
) -> None:
    sessions = {"answer_bots": True, "max_consecutive_bot_replies": 2}
    async with telegram_service(tmp_path, db_url, anthropic, sessions=sessions) as (fake, service):
        for n in range(4):
            tg_bot(fake, f"{BOT} ping {n}")
            if n < 2:
                await fake.wait_for_sent(n + 1, timeout=10)
        await settled(service)
        assert [s.plain_text for s in fake.sent] == ["reply: ping 0", "reply: ping 1"]
        tg_group(fake, f"{BOT} a person speaks")
        await fake.wait_for_sent(3, timeout=10)
        tg_bot(fake, f"{BOT} ping again")
        sent = await fake.wait_for_sent(4, timeout=10)
    assert [s.plain_text for s in sent[2:]] == ["reply: a person speaks", "reply: ping again"]


# --- Discord ---------------------------------------------------------------------------------


async def test_discord_a_reply_to_the_bot_is_answered_without_a_mention(
    tmp_path: Path, db_url: str, store: Store, anthropic: FakeAnthropic
) -> None:
    async with discord_service(tmp_path, db_url, anthropic) as (fake, _):
        in_guild(fake, "hello", mentions_bot=True)
        await fake.wait_for_sent(1, timeout=10)
        in_guild(fake, "and then?", reply_to_bot=True)
        sent = await fake.wait_for_sent(2, timeout=10)
    assert sent[1].content == "reply: and then?"


async def test_discord_a_message_naming_only_another_bot_is_not_answered(
    tmp_path: Path, db_url: str, store: Store, anthropic: FakeAnthropic, responder: ChatResponder
) -> None:
    async with discord_service(tmp_path, db_url, anthropic) as (fake, service):
        in_guild(fake, "hello", mentions_bot=True)
        await fake.wait_for_sent(1, timeout=10)
        in_guild(fake, f"<@{DISCORD_BOT}> what is the weather?")
        in_guild(fake, f"<@{DISCORD_BOT}> and what do you think?", reply_to_bot=True)
        await settled(service)
    assert len(fake.sent) == 1
    assert len(responder.chat_bodies) == 1


async def test_discord_another_bots_message_is_not_answered_by_default(
    tmp_path: Path, db_url: str, store: Store, anthropic: FakeAnthropic, responder: ChatResponder
) -> None:
    async with discord_service(tmp_path, db_url, anthropic) as (fake, service):
        dc_bot(fake, "beep, answer me", mentions_bot=True)
        await settled(service)
        assert fake.sent == [] and responder.chat_bodies == []
        in_guild(fake, "did the bot say something?", mentions_bot=True)
        [sent] = await fake.wait_for_sent(1, timeout=10)
    assert sent.content == "reply: did the bot say something?"
    assert "beep, answer me" in str(responder.chat_bodies[0]["messages"])


async def test_discord_a_bot_loop_is_cut_after_the_configured_number_of_replies(
    tmp_path: Path, db_url: str, store: Store, anthropic: FakeAnthropic
) -> None:
    sessions = {"answer_bots": True, "max_consecutive_bot_replies": 2}
    async with discord_service(tmp_path, db_url, anthropic, sessions=sessions) as (fake, service):
        for n in range(4):
            dc_bot(fake, f"ping {n}", mentions_bot=True)
            if n < 2:
                await fake.wait_for_sent(n + 1, timeout=10)
        await settled(service)
        assert [s.content for s in fake.sent] == ["reply: ping 0", "reply: ping 1"]
        in_guild(fake, "a person speaks", mentions_bot=True)
        await fake.wait_for_sent(3, timeout=10)
        dc_bot(fake, "ping again", mentions_bot=True)
        sent = await fake.wait_for_sent(4, timeout=10)
    assert [s.content for s in sent[2:]] == ["reply: a person speaks", "reply: ping again"]


# --- the real command ------------------------------------------------------------------------


async def test_hygieia_run_leaves_another_bot_unanswered_and_answers_a_reply_to_itself(
    tmp_path: Path, anthropic: FakeAnthropic
) -> None:
    async with FakeTelegram() as fake:
        env = clean_env()
        env.update(
            {
                "TELEGRAM_BOT_TOKEN": fake.token,
                "HYGIEIA_TELEGRAM_BASE_URL": fake.root,
                "ANTHROPIC_API_KEY": "test",
                "ANTHROPIC_BASE_URL": anthropic.base_url,
                "HYGIEIA_ALLOWED_USERS": f"telegram:{ALICE},telegram:{OTHER_BOT}",
                "HYGIEIA_DATA_DIR": str(tmp_path),
                "HYGIEIA_MODEL": MODEL,
                "HYGIEIA_TELEGRAM__POLL_TIMEOUT": "1",
                "HYGIEIA_DELIVERY__STREAMING": "false",
                "PYTHONPATH": str(REPO),
            }
        )
        async with hygieia_run(env, tmp_path) as proc:
            tg_bot(fake, f"{BOT} beep, answer me")
            tg_group(fake, f"{BOT} hello")
            await fake.wait_for_sent(1, timeout=30)
            tg_group(fake, "and then?", reply_to_bot=True)
            sent = await fake.wait_for_sent(2, timeout=30)
            await asyncio.sleep(0.5)
            stderr = await sigterm_and_wait(proc)
    assert proc.returncode == 0, stderr
    assert [s.plain_text for s in fake.sent] == [s.plain_text for s in sent]
    assert [s.plain_text.rsplit(": ", 1)[-1] for s in sent] == ["hello", "and then?"]
