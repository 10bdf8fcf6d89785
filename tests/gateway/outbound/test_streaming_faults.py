"""Streamed replies when Telegram does not play along: an edit refused, the message deleted by
the user while it is written, a reply that starts with what formats to nothing, the process
killed (SIGKILL) mid-stream twice. Every case ends with exactly one complete answer in the chat."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.outbound.streaming import RESTART_NOTE
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic, text_reply
from tests.fakes.anthropic_sse import Pacing
from tests.fakes.telegram import FakeTelegram
from tests.gateway.conftest import MODEL, ChatResponder
from tests.gateway.outbound.test_streaming import ANSWER, DM_KEY, EDITS, stored_reply
from tests.gateway.platforms.telegram_bot.test_telegram_service import (
    ALICE,
    REPO,
    make_settings,
    serving,
    until,
)
from tests.process_env import clean_env, hygieia_run, sigterm_and_wait

SLOW = Pacing(chunk_chars=6, delay=0.03, first_delay=0.2)


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def anthropic() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(responder=ChatResponder()) as fake:
        fake.pacing = SLOW
        yield fake


def complete(telegram: FakeTelegram, text: str) -> list[int]:
    """Ids of the chat's messages that show ``text`` whole now."""
    return [s.message_id for s in telegram.sent if s.plain_text == text]


async def test_an_edit_refused_mid_stream_still_ends_with_one_complete_answer(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    anthropic.script(text_reply(ANSWER))
    settings = make_settings(
        tmp_path, db_url, telegram, anthropic, delivery={"edit_interval_seconds": 0.2}, telegram=EDITS
    )
    async with serving(settings) as service:
        telegram.push_message(ALICE, "tell me everything", user_id=ALICE)
        await until(lambda: bool(telegram.sent), within=20)
        telegram.fail_next("editMessageText", 400, description="Bad Request: message can't be edited")
        await until(lambda: bool(complete(telegram, ANSWER)), within=30)
        await asyncio.wait_for(service.gateway.wait_idle(), 10)
        await service.delivery.flush()
    assert len(complete(telegram, ANSWER)) == 1
    assert await stored_reply(store, DM_KEY) == ANSWER


async def test_the_message_deleted_mid_stream_ends_with_one_complete_answer(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    anthropic.script(text_reply(ANSWER))
    settings = make_settings(
        tmp_path, db_url, telegram, anthropic, delivery={"edit_interval_seconds": 0.2}, telegram=EDITS
    )
    async with serving(settings) as service:
        telegram.push_message(ALICE, "tell me everything", user_id=ALICE)
        await until(lambda: bool(telegram.edits), within=20)
        first = telegram.sent[0]
        telegram.user_deletes(first.chat_id, first.message_id)
        await until(lambda: bool(complete(telegram, ANSWER)), within=30)
        await asyncio.wait_for(service.gateway.wait_idle(), 10)
        await service.delivery.flush()
    assert len(complete(telegram, ANSWER)) == 1 and len(telegram.sent) == 1
    assert any(c.status == 400 for c in telegram.calls("editMessageText"))  # it did try the edit
    assert await stored_reply(store, DM_KEY) == ANSWER


async def test_a_streamed_reply_of_backticks_is_shown_from_its_first_chunk(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    reply = "`" * 8000
    anthropic.pacing = Pacing(chunk_chars=400, delay=0.05)
    anthropic.script(text_reply(reply))
    settings = make_settings(
        tmp_path,
        db_url,
        telegram,
        anthropic,
        delivery={"edit_interval_seconds": 0.2},
        llm={"max_retries": 0, "max_output_tokens": 8000},
    )
    async with serving(settings) as service:
        telegram.push_message(ALICE, "show me backticks", user_id=ALICE)
        await asyncio.sleep(0.5)
        await until(lambda: sum(s.plain_text.count("`") for s in telegram.sent) >= 8000, within=30)
        await asyncio.wait_for(service.gateway.wait_idle(), 10)
        await service.delivery.flush()
    refused = [c for c in telegram.calls("sendMessage") if c.status == 400]
    assert refused == []  # the first chunk was not refused as empty
    assert len(telegram.sent) == 3 and all(s.plain_text.count("`") > 3000 for s in telegram.sent)


async def test_killed_twice_mid_stream_the_question_still_gets_exactly_one_complete_answer(
    tmp_path: Path,
) -> None:
    second = ANSWER.replace("Sentence", "Line")
    final = "Answered after two crashes."
    async with FakeTelegram() as telegram, FakeAnthropic(responder=ChatResponder()) as anthropic:
        anthropic.pacing = Pacing(chunk_chars=4, delay=0.1)  # slow enough to be killed mid-answer
        anthropic.script(text_reply(ANSWER), text_reply(second), text_reply(final))
        env = clean_env()
        env.update(
            {
                "TELEGRAM_BOT_TOKEN": telegram.token,
                "HYGIEIA_TELEGRAM_BASE_URL": telegram.root,
                "HYGIEIA_TELEGRAM__POLL_TIMEOUT": "1",
                "HYGIEIA_TELEGRAM__DRAFTS": "false",
                "ANTHROPIC_API_KEY": "test",
                "ANTHROPIC_BASE_URL": anthropic.base_url,
                "HYGIEIA_ALLOWED_USERS": f"telegram:{ALICE}",
                "HYGIEIA_DATA_DIR": str(tmp_path),
                "HYGIEIA_MODEL": MODEL,
                "PYTHONPATH": str(REPO),
            }
        )
        for crash, pushed in ((1, True), (2, False)):
            async with hygieia_run(env, tmp_path) as proc:
                await until(lambda: bool(telegram.calls("getUpdates")), within=60)
                if pushed:
                    telegram.push_message(ALICE, "a long question", user_id=ALICE)
                await until(
                    lambda n=crash: len(telegram.sent) >= n and len(telegram.edits) >= 2 * n, within=90
                )
                proc.kill()  # SIGKILL: no chance to finish or to tidy up
                await proc.wait()
        async with hygieia_run(env, tmp_path) as proc:
            await until(lambda: bool(complete(telegram, final)), within=90)
            await until(lambda: all(RESTART_NOTE in s.plain_text for s in telegram.sent[:2]), within=60)
            stderr = await sigterm_and_wait(proc)

    assert proc.returncode == 0, stderr
    assert [s.plain_text for s in telegram.sent[2:]] == [final]  # answered once, whole
    assert not any(s.plain_text in (ANSWER, second) for s in telegram.sent)  # no earlier try passes as whole
    assert len(anthropic.message_requests) == 3
