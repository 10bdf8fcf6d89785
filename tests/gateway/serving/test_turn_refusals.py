"""A classifier refusal (``stop_reason: "refusal"``) through the whole service, on Telegram and Discord.

The real SDKs against the fake Bot API / Discord API and the fake Messages API (which counts
requests), the SQL store on every available engine, wired by :class:`gateway.runner.Service`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.config import Settings
from gateway.outbound.replies import REFUSAL_LINE
from gateway.runner import Service, build_adapters
from gateway.store.repository import Store
from tests.fakes.anthropic import Answer, FakeAnthropic, refusal_reply
from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import FakeTelegram
from tests.gateway.admin_support import admin_client
from tests.gateway.conftest import MODEL, ChatResponder
from tests.gateway.discord_support import DM_CHANNEL, USER, dm

ALICE = 42
PARTIAL = "Here is the first part of an answer that the classifier then cut short"


@dataclass
class Chat:
    """One platform's fake, driven the same way: say something, read what the bot shows."""

    platform: str
    key: str
    say: Callable[[str], Any]
    shown: Callable[[], list[str]]
    settings: dict[str, Any]


@pytest.fixture(params=["telegram", "discord"])
async def chat(request: pytest.FixtureRequest) -> AsyncIterator[Chat]:
    if request.param == "telegram":
        async with FakeTelegram() as telegram:
            yield Chat(
                "telegram",
                f"telegram:dm:{ALICE}",
                lambda text: telegram.push_message(ALICE, text, user_id=ALICE),
                lambda: [s.plain_text for s in telegram.sent],
                {
                    "telegram_bot_token": telegram.token,
                    "telegram_base_url": telegram.root,
                    "telegram": {"poll_timeout": 1},
                    "allowed_users": [f"telegram:{ALICE}"],
                },
            )
        return
    async with FakeDiscord() as discord:
        yield Chat(
            "discord",
            f"discord:dm:{DM_CHANNEL}",
            lambda text: dm(discord, text),
            lambda: [s.content for s in discord.sent],
            {
                "discord_bot_token": discord.token,
                "discord_api_base": discord.api_base,
                "discord_gateway_url": discord.gateway_url,
                # The fake sends its guilds at once: no need to wait discord.py's 2 s for more.
                "discord": {"guild_ready_timeout": 0.05},
                "allowed_users": [f"discord:{USER}"],
            },
        )


@asynccontextmanager
async def serving(
    tmp_path: Path, db_url: str, chat: Chat, model_api: FakeAnthropic
) -> AsyncIterator[Service]:
    settings = Settings(
        data_dir=tmp_path,
        database_url=db_url,
        anthropic_api_key="test",
        anthropic_base_url=model_api.base_url,
        model=MODEL,
        # The SDK's own retries stay on: a refusal is a 200 answer, none of them may repeat it.
        llm={"max_retries": 2},
        sessions={"turn_grace_seconds": 0.2},
        delivery={"streaming": True},
        **chat.settings,
    )
    service = await Service.build(settings, build_adapters(settings, [chat.platform]), migrate=False)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


async def until(check: Callable[[], bool | Awaitable[bool]], within: float = 15.0) -> None:
    deadline = time.monotonic() + within
    while True:
        result = check()
        if await result if isinstance(result, Awaitable) else result:
            return
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def refusing_once(partial: str) -> tuple[ChatResponder, FakeAnthropic]:
    responder = ChatResponder()
    answers: list[Answer] = [refusal_reply(partial, category="cyber")]
    responder.override = lambda body: answers.pop(0) if answers else None
    return responder, FakeAnthropic(responder=responder)


@pytest.mark.parametrize("partial", [PARTIAL, ""], ids=["mid_stream", "at_start"])
async def test_a_refusal_ends_the_turn_with_one_plain_line_and_the_next_message_is_answered(
    tmp_path: Path, db_url: str, store: Store, chat: Chat, partial: str
) -> None:
    responder, fake = refusing_once(partial)
    async with fake, serving(tmp_path, db_url, chat, fake):
        chat.say("tell me how to do the thing")
        await until(lambda: chat.shown() == [REFUSAL_LINE])
        await asyncio.sleep(0.3)  # time for a blind retry to show itself
        assert fake.counts["messages"] == 1  # nothing retried
        assert len(responder.chat_bodies) == 1
        chat.say("ok, what is the weather like?")
        await until(lambda: len(chat.shown()) == 2)

    assert chat.shown() == [REFUSAL_LINE, "reply: ok, what is the weather like?"]
    info = await store.current_session(chat.key)
    assert info is not None
    stored = [(m.role, m.kind, m.text.split("] ", 1)[-1]) for m in await store.messages_after(info.id, 0)]
    assert stored[0][:2] == ("user", "message")
    role, kind, text = stored[1]
    assert (role, kind) == ("assistant", "notice")
    assert text.startswith(partial) if partial else True
    assert "[cut off: the model declined to answer (refusal: cyber)]" in text
    assert stored[2:] == [
        ("user", "message", "ok, what is the weather like?"),
        ("assistant", "message", "reply: ok, what is the weather like?"),
    ]


async def test_a_refusal_is_counted_in_metrics_by_category_and_on_the_admin_session_page(
    tmp_path: Path, db_url: str, store: Store, chat: Chat
) -> None:
    _, fake = refusing_once(PARTIAL)
    async with fake, serving(tmp_path, db_url, chat, fake):
        chat.say("tell me how to do the thing")
        await until(lambda: chat.shown() == [REFUSAL_LINE])

    info = await store.current_session(chat.key)
    assert info is not None
    async with admin_client(store) as client:
        metrics = (await client.get("/metrics")).text
        page = (await client.get(f"/sessions/{info.id}")).text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
    }
    assert samples[("hygieia_refusals", (("category", "cyber"),))] == 1
    assert "1 refusal(s) (cyber 1)" in page
