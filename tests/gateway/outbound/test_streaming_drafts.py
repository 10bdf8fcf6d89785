"""Streamed replies as Telegram drafts: in a private chat the reply grows as a draft (no message,
no edits) and is sent once, whole; groups keep editing; a chat that refuses drafts is edited; a
long answer sends its draft again before it lapses; a crash leaves no partial message behind."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.outbound.streaming import RESTART_NOTE
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic, text_reply
from tests.fakes.anthropic_sse import Pacing
from tests.fakes.telegram import FakeTelegram
from tests.gateway.conftest import MODEL, ChatResponder
from tests.gateway.outbound.test_streaming import ANSWER, DM_KEY, REALISTIC, stored_reply
from tests.gateway.platforms.telegram_bot.test_telegram_service import (
    ALICE,
    BOT,
    GROUP,
    REPO,
    make_settings,
    serving,
    until,
)
from tests.process_env import clean_env, hygieia_run, sigterm_and_wait


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def anthropic() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(responder=ChatResponder()) as fake:
        fake.pacing = REALISTIC
        yield fake


async def test_a_dm_reply_grows_as_a_draft_and_ends_as_one_message(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    anthropic.script(text_reply(ANSWER))
    settings = make_settings(tmp_path, db_url, telegram, anthropic, delivery={})
    async with serving(settings) as service:
        telegram.push_message(ALICE, "tell me everything", user_id=ALICE)
        await until(lambda: bool(telegram.sent), within=20)
        await asyncio.wait_for(service.gateway.wait_idle(), 10)
        await service.delivery.flush()
        row = await store.outbox_for_inbox(1)

    [sent] = telegram.sent
    assert sent.plain_text == ANSWER == await stored_reply(store, DM_KEY)
    assert telegram.drafts and telegram.edits == []
    assert all(ANSWER.startswith(text) for _, _, text, _ in telegram.drafts)
    assert len(telegram.drafts[0][2]) < len(ANSWER)  # it was shown before it was complete
    assert len({draft_id for _, draft_id, _, _ in telegram.drafts}) == 1  # one draft, animated
    assert row is not None and row.status == "sent" and row.delivered_ids == [f"{ALICE}:{sent.message_id}"]


async def test_a_group_reply_is_still_edited_in_place(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    anthropic.script(text_reply(ANSWER))
    settings = make_settings(tmp_path, db_url, telegram, anthropic, delivery={})
    async with serving(settings) as service:
        telegram.push_message(GROUP, f"{BOT} tell me everything", user_id=ALICE, chat_type="supergroup")
        await until(lambda: bool(telegram.sent) and telegram.sent[0].plain_text == ANSWER, within=20)
        await asyncio.wait_for(service.gateway.wait_idle(), 10)
    assert len(telegram.sent) == 1 and telegram.edits
    assert telegram.calls("sendMessageDraft") == []


async def test_a_refused_draft_falls_back_to_edits_for_that_chat(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    anthropic.script(text_reply(ANSWER), text_reply("A second, shorter answer."))
    telegram.fail_next("sendMessageDraft", 400, description="Bad Request: TEXTDRAFT_PEER_INVALID")
    settings = make_settings(tmp_path, db_url, telegram, anthropic, delivery={})
    async with serving(settings) as service:
        telegram.push_message(ALICE, "tell me everything", user_id=ALICE)
        await until(lambda: bool(telegram.sent) and telegram.sent[0].plain_text == ANSWER, within=20)
        await asyncio.wait_for(service.gateway.wait_idle(), 10)
        telegram.push_message(ALICE, "and then?", user_id=ALICE)
        await until(lambda: len(telegram.sent) == 2, within=20)
        await asyncio.wait_for(service.gateway.wait_idle(), 10)
    assert [s.plain_text for s in telegram.sent] == [ANSWER, "A second, shorter answer."]
    assert telegram.edits and telegram.drafts == []
    assert len(telegram.calls("sendMessageDraft")) == 1  # refused once; not asked again in that chat
    assert await stored_reply(store, DM_KEY) == "A second, shorter answer."


async def test_a_long_answer_sends_its_draft_again_before_it_lapses(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    # Words arrive 2.4 s apart: with a 0.3 s refresh the unchanged draft is sent again between them
    # (as often as the chat's pacing of about one send a second lets it).
    anthropic.pacing = Pacing(chunk_chars=12, delay=2.4)
    reply = "Slowly, word by word, the answer is written out."
    anthropic.script(text_reply(reply))
    settings = make_settings(
        tmp_path,
        db_url,
        telegram,
        anthropic,
        delivery={"edit_interval_seconds": 0.2},
        telegram={"poll_timeout": 1, "draft_refresh_seconds": 0.3},
    )
    async with serving(settings) as service:
        telegram.push_message(ALICE, "take your time", user_id=ALICE)
        await until(lambda: bool(telegram.sent), within=30)
        await asyncio.wait_for(service.gateway.wait_idle(), 10)
    texts = [text for _, _, text, _ in telegram.drafts]
    assert any(a == b for a, b in itertools.pairwise(texts)), texts  # the same text again: a refresh
    gaps = [b - a for (*_, a), (*_, b) in itertools.pairwise(telegram.drafts)]
    assert max(gaps) < 2.0, gaps  # never left for as long as a word takes to come
    assert [s.plain_text for s in telegram.sent] == [reply]


async def test_a_crash_mid_draft_leaves_no_partial_and_the_answer_is_sent_once(tmp_path: Path) -> None:
    async with FakeTelegram() as telegram, FakeAnthropic(responder=ChatResponder()) as anthropic:
        anthropic.pacing = Pacing(chunk_chars=4, delay=0.1)  # slow enough to be killed mid-answer
        anthropic.script(text_reply(ANSWER), text_reply("Answered after the restart."))
        env = clean_env()
        env.update(
            {
                "TELEGRAM_BOT_TOKEN": telegram.token,
                "HYGIEIA_TELEGRAM_BASE_URL": telegram.root,
                "HYGIEIA_TELEGRAM__POLL_TIMEOUT": "1",
                "ANTHROPIC_API_KEY": "test",
                "ANTHROPIC_BASE_URL": anthropic.base_url,
                "HYGIEIA_ALLOWED_USERS": f"telegram:{ALICE}",
                "HYGIEIA_DATA_DIR": str(tmp_path),
                "HYGIEIA_MODEL": MODEL,
                "PYTHONPATH": str(REPO),
            }
        )
        async with hygieia_run(env, tmp_path) as proc:
            await until(lambda: bool(telegram.calls("getUpdates")), within=60)
            telegram.push_message(ALICE, "a long question", user_id=ALICE)
            await until(lambda: len(telegram.drafts) >= 2, within=60)
            proc.kill()  # a crash: the draft simply lapses
            await proc.wait()
        assert telegram.sent == []

        async with hygieia_run(env, tmp_path) as proc:
            await until(lambda: bool(telegram.sent), within=90)
            await asyncio.sleep(0.5)  # anything more would come now
            stderr = await sigterm_and_wait(proc)

    assert proc.returncode == 0, stderr
    assert [s.plain_text for s in telegram.sent] == ["Answered after the restart."]  # once, whole
    assert not any(RESTART_NOTE in text for *_, text, _ in telegram.edits)
    assert len(anthropic.message_requests) == 2
