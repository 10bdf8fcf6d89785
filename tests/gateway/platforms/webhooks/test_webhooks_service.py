"""Webhooks through the whole service: signed posts to /hooks land in a Telegram or Discord chat as a
turn the agent answers (fake Anthropic) or as a plain message, through the fake platform servers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from gateway.config import Settings
from gateway.platforms.base import PlatformAdapter
from gateway.runner import Service, build_adapters
from gateway.runner.adapters import build_webhooks
from gateway.runner.listener import DoorListener
from gateway.store.models import inbox
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import FakeTelegram
from tests.gateway.conftest import MODEL, ChatResponder
from tests.gateway.discord_support import make_adapter as discord_adapter
from tests.gateway.webhooks_support import PUSH, SECRET, SECRET_ENV, post_github, route

CHAT = 4242


@pytest.fixture(autouse=True)
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)


@pytest.fixture
def responder() -> ChatResponder:
    return ChatResponder()


@pytest.fixture
async def anthropic(responder: ChatResponder) -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(responder=responder) as fake:
        yield fake


def settings_for(tmp_path: Path, db_url: str, model_api: FakeAnthropic, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path,
        "database_url": db_url,
        "anthropic_api_key": "test",
        "anthropic_base_url": model_api.base_url,
        "model": MODEL,
        "llm": {"max_retries": 0},
        "sessions": {"turn_grace_seconds": 0.2},
        "delivery": {"streaming": False},
        "api": {"port": 0},
    }
    values.update(overrides)
    return Settings(**values)


def telegram_settings(
    tmp_path: Path, db_url: str, model_api: FakeAnthropic, bot: FakeTelegram, **hook: Any
) -> Settings:
    return settings_for(
        tmp_path,
        db_url,
        model_api,
        telegram_bot_token=bot.token,
        telegram_base_url=bot.root,
        telegram={"poll_timeout": 1},
        webhooks={"routes": {"gh": route(f"telegram:{CHAT}", **hook)}},
    )


@asynccontextmanager
async def serving(
    settings: Settings, adapters: list[PlatformAdapter]
) -> AsyncIterator[tuple[Service, httpx.AsyncClient, str]]:
    service = await Service.build(settings, adapters)
    await service.start()
    hooks = next(a for a in adapters if a.name == "webhooks")
    port = hooks._listener.port  # type: ignore[attr-defined]
    try:
        async with httpx.AsyncClient() as client:
            yield service, client, f"http://127.0.0.1:{port}/hooks/gh"
    finally:
        await service.stop()


async def inbox_rows(service: Service) -> int:
    async with service.db.engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(inbox))).scalar_one())


async def test_a_signed_push_becomes_a_turn_answered_in_the_telegram_chat(
    tmp_path: Path, db_url: str, anthropic: FakeAnthropic, responder: ChatResponder
) -> None:
    async with FakeTelegram() as bot:
        settings = telegram_settings(tmp_path, db_url, anthropic, bot)
        async with serving(settings, build_adapters(settings, ["webhooks"])) as (_service, client, url):
            response = await post_github(client, url, PUSH)
            assert response.status_code == 202, response.text
            [sent] = await bot.wait_for_sent(1, timeout=15)

    assert sent.chat_id == CHAT
    assert sent.plain_text == "reply: mona pushed to octo/hello: Fix the flux capacitor"
    assert sent.reply_parameters is None  # a webhook is no message in the chat: nothing quoted
    assert len(responder.chat_bodies) == 1


async def test_deliver_only_posts_the_text_to_telegram_without_a_model_call(
    tmp_path: Path, db_url: str, anthropic: FakeAnthropic, responder: ChatResponder
) -> None:
    async with FakeTelegram() as bot:
        settings = telegram_settings(tmp_path, db_url, anthropic, bot, deliver_only=True)
        async with serving(settings, build_adapters(settings, ["webhooks"])) as (_service, client, url):
            assert (await post_github(client, url, PUSH)).status_code == 202
            [sent] = await bot.wait_for_sent(1, timeout=15)

    assert sent.plain_text == "mona pushed to octo/hello: Fix the flux capacitor"
    assert responder.chat_bodies == []


async def test_a_replayed_delivery_is_stored_once_and_answered_once(
    tmp_path: Path, db_url: str, anthropic: FakeAnthropic, responder: ChatResponder
) -> None:
    async with FakeTelegram() as bot:
        settings = telegram_settings(tmp_path, db_url, anthropic, bot)
        async with serving(settings, build_adapters(settings, ["webhooks"])) as (service, client, url):
            first = await post_github(client, url, PUSH, delivery="d-1")
            again = await post_github(client, url, PUSH, delivery="d-1")
            await bot.wait_for_sent(1, timeout=15)
            await service.gateway.wait_idle()
            rows = await inbox_rows(service)

    assert (first.status_code, again.status_code) == (202, 202)
    assert rows == 1
    assert len(bot.sent) == 1
    assert len(responder.chat_bodies) == 1


async def test_a_burst_within_coalesce_seconds_is_one_turn(
    tmp_path: Path, db_url: str, anthropic: FakeAnthropic, responder: ChatResponder
) -> None:
    async with FakeTelegram() as bot:
        settings = telegram_settings(tmp_path, db_url, anthropic, bot, coalesce_seconds=1.0)
        async with serving(settings, build_adapters(settings, ["webhooks"])) as (service, client, url):
            for n in range(3):
                commits = [{"message": f"commit {n}"}]
                assert (await post_github(client, url, {**PUSH, "commits": commits})).status_code == 202
            await bot.wait_for_sent(1, timeout=15)
            await service.gateway.wait_idle()

    assert len(responder.chat_bodies) == 1
    prompt = str(responder.chat_bodies[0]["messages"])
    assert all(f"commit {n}" in prompt for n in range(3))
    assert len(bot.sent) == 1


async def test_a_deliver_only_burst_is_one_message(
    tmp_path: Path, db_url: str, anthropic: FakeAnthropic
) -> None:
    async with FakeTelegram() as bot:
        settings = telegram_settings(
            tmp_path, db_url, anthropic, bot, coalesce_seconds=1.0, deliver_only=True
        )
        async with serving(settings, build_adapters(settings, ["webhooks"])) as (service, client, url):
            for n in range(3):
                await post_github(client, url, {**PUSH, "commits": [{"message": f"commit {n}"}]})
            [sent] = await bot.wait_for_sent(1, timeout=15)
            await service.gateway.wait_idle()

    assert sent.plain_text.startswith("3 webhook deliveries:")
    assert [sent.plain_text.index(f"commit {n}") for n in range(3)] == sorted(
        sent.plain_text.index(f"commit {n}") for n in range(3)
    )
    assert len(bot.sent) == 1


async def test_a_bad_signature_gets_401_and_stores_nothing(
    tmp_path: Path, db_url: str, anthropic: FakeAnthropic
) -> None:
    async with FakeTelegram() as bot:
        settings = telegram_settings(tmp_path, db_url, anthropic, bot)
        async with serving(settings, build_adapters(settings, ["webhooks"])) as (service, client, url):
            body = b'{"zen": "hi"}'
            headers = {"X-Hub-Signature-256": "sha256=" + "0" * 64, "Content-Type": "application/json"}
            response = await client.post(url, content=body, headers=headers)
            rows = await inbox_rows(service)

    assert response.status_code == 401
    assert response.json()["error"]["type"] == "bad_signature"
    assert rows == 0


@pytest.mark.parametrize("deliver_only", [False, True], ids=["turn", "deliver_only"])
async def test_a_delivery_reaches_a_discord_channel(
    tmp_path: Path, db_url: str, anthropic: FakeAnthropic, responder: ChatResponder, deliver_only: bool
) -> None:
    async with FakeDiscord() as discord:
        settings = settings_for(
            tmp_path,
            db_url,
            anthropic,
            discord_bot_token=discord.token,
            webhooks={"routes": {"gh": route(f"discord:{discord.channel_id}", deliver_only=deliver_only)}},
        )
        hooks = build_webhooks(settings, DoorListener("127.0.0.1", 0))
        async with serving(settings, [discord_adapter(discord), hooks]) as (_service, client, url):
            assert (await post_github(client, url, PUSH)).status_code == 202
            [sent] = await discord.wait_for_sent(1, timeout=15)

    expected = "mona pushed to octo/hello: Fix the flux capacitor"
    assert sent.channel_id == discord.channel_id
    assert sent.content == (expected if deliver_only else f"reply: {expected}")
    assert len(responder.chat_bodies) == (0 if deliver_only else 1)


async def test_a_burst_stored_before_a_stop_is_served_as_one_after_the_restart(
    tmp_path: Path, db_url: str, anthropic: FakeAnthropic, responder: ChatResponder
) -> None:
    async with FakeTelegram() as bot:
        settings = telegram_settings(tmp_path, db_url, anthropic, bot, coalesce_seconds=2.0)
        async with serving(settings, build_adapters(settings, ["webhooks"])) as (_service, client, url):
            for n in range(2):
                await post_github(client, url, {**PUSH, "commits": [{"message": f"commit {n}"}]})
        assert bot.sent == []  # stopped inside the window: nothing served yet, both stored
        async with serving(settings, build_adapters(settings, ["webhooks"])) as (service, _client, _url):
            [sent] = await bot.wait_for_sent(1, timeout=20)
            await service.gateway.wait_idle()

    assert len(responder.chat_bodies) == 1
    prompt = str(responder.chat_bodies[0]["messages"])
    assert "commit 0" in prompt and "commit 1" in prompt
    assert sent.plain_text.startswith("reply: ")


async def test_a_payload_that_reads_like_a_command_is_text_for_the_agent(
    tmp_path: Path, db_url: str, anthropic: FakeAnthropic, responder: ChatResponder
) -> None:
    async with FakeTelegram() as bot:
        settings = telegram_settings(tmp_path, db_url, anthropic, bot, template="{{ text }}")
        async with serving(settings, build_adapters(settings, ["webhooks"])) as (_service, client, url):
            assert (await post_github(client, url, {"text": "/new"})).status_code == 202
            [sent] = await bot.wait_for_sent(1, timeout=15)

    assert sent.plain_text == "reply: /new"  # answered by the model, not run as /new
    assert len(responder.chat_bodies) == 1


async def test_a_very_long_delivery_id_is_stored_on_every_engine(
    tmp_path: Path, db_url: str, anthropic: FakeAnthropic
) -> None:
    async with FakeTelegram() as bot:
        settings = telegram_settings(tmp_path, db_url, anthropic, bot, deliver_only=True)
        async with serving(settings, build_adapters(settings, ["webhooks"])) as (service, client, url):
            first = await post_github(client, url, PUSH, delivery="d" * 300)
            again = await post_github(client, url, PUSH, delivery="d" * 300)
            await bot.wait_for_sent(1, timeout=15)
            rows = await inbox_rows(service)

    assert (first.status_code, again.status_code, rows) == (202, 202, 1)
