"""Compaction you can see: ``sessions.compaction_notice`` per platform, through the whole service.

``always``: a line when a compaction starts and one when it finishes; ``on_failure`` (default):
only the line saying it failed and the conversation goes on unsummarized; ``off``: silence.
Real python-telegram-bot and discord.py against their fakes, the real anthropic SDK against the
fake Messages API; each chat grown to 90% of the window so that the next turn compacts first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agent.tokens import estimate_messages_tokens
from agent.types import ChatMessage
from gateway.config import Settings
from gateway.outbound.failures import SUMMARIZING
from gateway.runner import Service, build_adapters
from gateway.serving.compaction_notices import FAILED, STARTED, finished
from gateway.store.repository import Store
from tests.fakes.anthropic import Answer, FakeAnthropic, error_reply
from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import FakeTelegram
from tests.gateway.conftest import MODEL, ChatResponder, is_summarizer_call
from tests.gateway.discord_support import DM_CHANNEL, USER, dm, make_adapter
from tests.gateway.platforms.telegram_bot.test_telegram_service import ALICE

WINDOW = 8_000
FILLER = "the quick brown fox jumps over the lazy dog while the band plays on " * 6
TG_KEY = f"telegram:dm:{ALICE}"
DC_KEY = f"discord:dm:{DM_CHANNEL}"
REPLY = "reply: are you there?"
SLOW_AFTER = 0.3  # the start line comes once a compaction has run this long
# For the tests of the failure line alone: a failing summary on a loaded machine can take longer
# than SLOW_AFTER, and the "being summarized" line it then earns is not what they look at.
NEVER_SLOW = {"turn_grace_seconds": 0.2, "summarizing_notice_seconds": 120}
SUMMARY_SECONDS = 1.0  # every summary request takes this long


class FailingSummaries(ChatResponder):
    """Chats are answered; every summary request is a 500 (the summarizer is down)."""

    async def __call__(self, body: dict[str, Any]) -> Answer:
        if is_summarizer_call(body):
            self.summary_bodies.append(body)
            return error_reply(500, "api_error", "Internal server error")
        return await super().__call__(body)


async def grown(store: Store, key: str, platform: str, chat_id: str, user_id: str) -> int:
    """A DM grown to 90% of the window while the bot was away; returns its message count."""
    info = await store.get_or_create_session(
        key,
        platform=platform,
        chat_id=chat_id,
        user_id=user_id,
        system_prompt="You are a test bot.",
        model=MODEL,
    )
    for i in range(40):
        text = f"{i}: {FILLER[:400]}"
        await store.append_message(
            info.id, ChatMessage.user(text) if i % 2 == 0 else ChatMessage.assistant(text)
        )
    state = await store.load_context_state(info.id)
    state.last_prompt_tokens = int(0.9 * WINDOW)
    state.last_prompt_estimate = estimate_messages_tokens(await store.load_active(info.id))
    await store.save_context_state(info.id, state)
    return 40


SUMMARY_MODEL = "claude-haiku-4-5"  # the slow one, named so a change of default cannot hide it


@asynccontextmanager
async def both_platforms(
    tmp_path: Path, db_url: str, responder: ChatResponder, *, summary_seconds: float = 0.0, **values: Any
) -> AsyncIterator[tuple[FakeTelegram, FakeDiscord, Service]]:
    async with (
        FakeTelegram() as telegram,
        FakeDiscord() as discord,
        FakeAnthropic(context_window=WINDOW, responder=responder) as anthropic,
    ):
        anthropic.model_delays = {SUMMARY_MODEL: summary_seconds}
        sessions = {
            "turn_grace_seconds": 0.2,
            "summarizing_notice_seconds": SLOW_AFTER,
            "system_prompt": "You are a test bot.",
        }
        settings = Settings(
            data_dir=tmp_path,
            database_url=db_url,
            anthropic_api_key="test",
            anthropic_base_url=anthropic.base_url,
            model=MODEL,
            summary_model=SUMMARY_MODEL,
            context_window=WINDOW,
            llm={"max_retries": 0},
            delivery={"streaming": False},
            telegram_bot_token=telegram.token,
            telegram_base_url=telegram.root,
            discord_bot_token=discord.token,
            discord_api_base=discord.api_base,
            discord_gateway_url=discord.gateway_url,
            allowed_users=[f"telegram:{ALICE}", f"discord:{USER}"],
            **{"sessions": sessions, **values, "telegram": {"poll_timeout": 1, **values.get("telegram", {})}},
        )
        adapters = [*build_adapters(settings, ["telegram"]), make_adapter(discord, slash_commands=False)]
        service = await Service.build(settings, adapters, migrate=False)
        await service.start()
        try:
            yield telegram, discord, service
        finally:
            await service.stop()


async def ask_both(
    telegram: FakeTelegram, discord: FakeDiscord, service: Service, replies: int
) -> tuple[list[str], list[str]]:
    telegram.push_message(ALICE, "are you there?", user_id=ALICE)
    dm(discord, "are you there?")
    deadline = time.monotonic() + 40  # generous: a loaded machine is slow, a passing run is not
    while len(telegram.sent) + len(discord.sent) < replies and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)  # two fakes, one count: no single event to wait on
    await asyncio.sleep(0.3)
    await asyncio.wait_for(service.gateway.wait_idle(), 20)
    return [s.plain_text for s in telegram.sent], [s.content for s in discord.sent]


async def test_always_on_one_platform_shows_start_and_finish_there_and_nothing_on_the_other(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    tg = await grown(store, TG_KEY, "telegram", str(ALICE), str(ALICE))
    await grown(store, DC_KEY, "discord", str(DM_CHANNEL), str(USER))
    async with both_platforms(
        tmp_path,
        db_url,
        ChatResponder(),
        telegram={"compaction_notice": "always"},
        summary_seconds=SUMMARY_SECONDS,
    ) as (
        telegram,
        discord,
        service,
    ):
        # Five in all (three here, two on Discord): the chat's sends are paced, so a count one
        # short would stop before the reply, which comes a second after the notices.
        tg_texts, dc_texts = await ask_both(telegram, discord, service, 5)
        compactions = await store.list_compactions((await store.current_session(TG_KEY)).id)  # type: ignore[union-attr]
    assert [c.trigger for c in compactions] == ["hygiene"]
    archived = compactions[0].messages_archived
    assert 0 < archived <= tg
    assert tg_texts == [STARTED, finished(archived), REPLY]
    # Discord: the default, on_failure: nothing failed, only the "being summarized" line of a slow one.
    assert dc_texts == [SUMMARIZING, REPLY]


async def test_a_failed_compaction_is_told_once_in_plain_words_on_both_platforms(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    await grown(store, TG_KEY, "telegram", str(ALICE), str(ALICE))
    await grown(store, DC_KEY, "discord", str(DM_CHANNEL), str(USER))
    responder = FailingSummaries()
    async with both_platforms(tmp_path, db_url, responder, sessions=NEVER_SLOW) as (
        telegram,
        discord,
        service,
    ):
        tg_texts, dc_texts = await ask_both(telegram, discord, service, 4)
    assert responder.summary_bodies  # the summarizer was asked, and failed
    assert tg_texts == [FAILED, REPLY]
    assert dc_texts == [FAILED, REPLY]


@pytest.mark.parametrize("mode", ["always", "on_failure"])
async def test_the_failure_line_is_said_in_every_mode_that_speaks(
    tmp_path: Path, db_url: str, store: Store, mode: str
) -> None:
    await grown(store, TG_KEY, "telegram", str(ALICE), str(ALICE))
    await grown(store, DC_KEY, "discord", str(DM_CHANNEL), str(USER))
    async with both_platforms(
        tmp_path,
        db_url,
        FailingSummaries(),
        sessions={
            **NEVER_SLOW,
            "compaction_notice": mode,
            # "always" says the start line too: its summary is slow on purpose (SUMMARY_SECONDS).
            "summarizing_notice_seconds": SLOW_AFTER if mode == "always" else 120,
        },
        summary_seconds=SUMMARY_SECONDS if mode == "always" else 0.0,
    ) as (
        telegram,
        discord,
        service,
    ):
        tg_texts, _ = await ask_both(telegram, discord, service, 4 + (2 if mode == "always" else 0))
    expected = [STARTED, FAILED, REPLY] if mode == "always" else [FAILED, REPLY]
    assert tg_texts == expected


async def test_off_on_a_platform_is_silent_there_even_when_the_compaction_fails(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    await grown(store, TG_KEY, "telegram", str(ALICE), str(ALICE))
    await grown(store, DC_KEY, "discord", str(DM_CHANNEL), str(USER))
    async with both_platforms(
        tmp_path, db_url, FailingSummaries(), sessions=NEVER_SLOW, discord={"compaction_notice": "off"}
    ) as (
        telegram,
        discord,
        service,
    ):
        tg_texts, dc_texts = await ask_both(telegram, discord, service, 3)
    assert tg_texts == [FAILED, REPLY]
    assert dc_texts == [REPLY]
