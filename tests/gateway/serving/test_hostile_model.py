"""The whole service against a hostile model API: whatever the server does, the chat is told at once in
one line (never held for the hour a server asks for), plain calls and streamed replies alike."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from gateway.config import Settings
from gateway.outbound import failures
from gateway.runner import Service, build_adapters
from gateway.store.repository import Store
from tests.fakes.anthropic_hostile import HostileAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.gateway.conftest import MODEL

ALICE = 42


@asynccontextmanager
async def service(
    tmp_path: Path, db_url: str, api: HostileAnthropic, *, streaming: bool
) -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as telegram:
        settings = Settings(
            data_dir=tmp_path,
            database_url=db_url,
            anthropic_api_key="test",
            anthropic_base_url=api.base_url,
            model=MODEL,
            llm={"max_retries": 2},
            delivery={"streaming": streaming},
            sessions={"turn_grace_seconds": 0.2},
            telegram_bot_token=telegram.token,
            telegram_base_url=telegram.root,
            telegram={"poll_timeout": 1},
            allowed_users=[f"telegram:{ALICE}"],
        )
        running = await Service.build(settings, build_adapters(settings, ["telegram"]), migrate=False)
        await running.start()
        try:
            yield telegram
        finally:
            await running.stop()


@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "streamed"])
async def test_a_server_asking_for_an_hour_gets_the_chat_told_at_once(
    tmp_path: Path, db_url: str, store: Store, streaming: bool
) -> None:
    async with (
        HostileAnthropic("retry_after_3600") as api,
        service(tmp_path, db_url, api, streaming=streaming) as telegram,
    ):
        telegram.push_message(ALICE, "hello", user_id=ALICE)
        sent = await telegram.wait_for_sent(1, timeout=10)
        asked = api.requests
    assert sent[0].plain_text == failures.OVERLOADED
    assert asked == 1  # the hour was neither waited out nor cut short by a quicker retry


@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "streamed"])
async def test_a_malformed_answer_gets_one_clear_line(
    tmp_path: Path, db_url: str, store: Store, streaming: bool
) -> None:
    async with (
        HostileAnthropic(
            "wrong_types", variant="count_is_negative" if not streaming else "final_count_is_negative"
        ) as api,
        service(tmp_path, db_url, api, streaming=streaming) as telegram,
    ):
        telegram.push_message(ALICE, "hello", user_id=ALICE)
        # Streamed, the text shown before the bad event comes first; the line follows.
        await telegram.wait_for_sent(2 if streaming else 1, timeout=10)
        await asyncio.sleep(0.3)  # nothing more comes
    assert [s.plain_text for s in telegram.sent if s.plain_text == failures.BROKEN] == [failures.BROKEN]
