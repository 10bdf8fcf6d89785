"""Streamed replies end to end: the fake Anthropic event stream -> the service -> edits on the
Telegram and Discord fakes, with the outbox recording the streamed message as the delivered one."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from gateway.outbound.streaming import INTERRUPTED_NOTE, RESTART_NOTE
from gateway.runner import Service
from gateway.splitter import join_parts
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic, text_reply, tool_use_reply
from tests.fakes.anthropic_sse import Pacing
from tests.fakes.discord import FakeDiscord
from tests.fakes.telegram import FakeTelegram
from tests.gateway.conftest import MODEL, ChatResponder
from tests.gateway.conftest import make_settings as base_settings
from tests.gateway.discord_support import DM_CHANNEL, dm, make_adapter
from tests.gateway.platforms.telegram_bot.test_telegram_service import (
    ALICE,
    REPO,
    conversation,
    make_settings,
    serving,
    until,
)
from tests.process_env import clean_env, hygieia_run, sigterm_and_wait

REALISTIC = Pacing(chunk_chars=6, delay=0.03, first_delay=0.3)  # ~200 characters a second
ANSWER = " ".join(f"Sentence {n} of a thoughtful answer that takes a while to write." for n in range(12))
DM_KEY = f"telegram:dm:{ALICE}"
# A private chat edited in place (its drafts: test_streaming_drafts.py).
EDITS = {"poll_timeout": 1, "drafts": False}


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def anthropic() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(responder=ChatResponder()) as fake:
        fake.pacing = REALISTIC
        yield fake


async def stored_reply(store: Store, key: str) -> str:
    replies = [m for m in await conversation(store, key) if m.role == "assistant" and m.text.strip()]
    return replies[-1].text


async def test_a_telegram_reply_is_shown_while_written_and_delivered_once(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    anthropic.script(text_reply(ANSWER))
    settings = make_settings(tmp_path, db_url, telegram, anthropic, delivery={}, telegram=EDITS)
    async with serving(settings) as service:
        telegram.push_message(ALICE, "tell me everything", user_id=ALICE)
        await until(lambda: bool(telegram.sent) and telegram.sent[0].plain_text == ANSWER, within=20)
        await asyncio.wait_for(service.gateway.wait_idle(), 10)
        await service.delivery.flush()
        row = await store.outbox_for_inbox(1)

    [sent] = telegram.sent  # one message, edited in place: nothing sent twice
    first_seen = telegram.edits[0][2] if telegram.edits else ""
    assert len(telegram.edits) >= 2 and len(first_seen) < len(ANSWER)
    times = [t for *_, t in telegram.edits]
    assert all(b - a >= 0.9 for a, b in itertools.pairwise(times))  # about one edit a second
    assert sent.plain_text == ANSWER == await stored_reply(store, DM_KEY)
    assert row is not None and row.status == "sent" and row.text == ANSWER
    assert row.delivered_ids == [f"{ALICE}:{sent.message_id}"]


async def test_a_tool_round_shows_a_status_line_that_the_final_text_replaces(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    # The model thinks after the tool long enough for a paced edit to show the status, even on a
    # loaded machine (the status shows at the pacer's next turn, or never if text came first).
    anthropic.pacing = Pacing(chunk_chars=6, delay=0.02, first_delay=1.5)
    anthropic.script(
        tool_use_reply("session_search", {"query": "budget"}, text="Let me look that up."),
        text_reply("Found it: the budget was approved."),
    )
    settings = make_settings(
        tmp_path, db_url, telegram, anthropic, delivery={"edit_interval_seconds": 0.2}, telegram=EDITS
    )
    async with serving(settings) as service:
        telegram.push_message(ALICE, "what about the budget?", user_id=ALICE)
        await until(lambda: bool(telegram.sent) and "approved." in telegram.sent[0].plain_text, within=20)
        await asyncio.wait_for(service.gateway.wait_idle(), 10)
    shown = [telegram.sent[0].params["text"]] + [text for *_, text, _ in telegram.edits]
    assert any(text.startswith("⏳ searching the conversation") for text in shown), shown
    assert len(telegram.sent) == 1 and telegram.sent[0].plain_text == "Found it: the budget was approved."


async def test_a_stream_that_fails_midway_is_marked_interrupted_and_answered_on_retry(
    tmp_path: Path, db_url: str, store: Store, telegram: FakeTelegram, anthropic: FakeAnthropic
) -> None:
    anthropic.pacing = Pacing(chunk_chars=6, delay=0.05)
    anthropic.script(text_reply(ANSWER), text_reply("Second try, complete."))
    anthropic.break_next_stream(after_deltas=20)
    settings = make_settings(tmp_path, db_url, telegram, anthropic, delivery={})
    async with serving(settings) as service:
        telegram.push_message(ALICE, "go on", user_id=ALICE)
        await until(lambda: any(INTERRUPTED_NOTE in s.plain_text for s in telegram.sent), within=20)
        await until(lambda: any(s.plain_text == "Second try, complete." for s in telegram.sent), within=30)
        await asyncio.wait_for(service.gateway.wait_idle(), 10)
    partial = telegram.sent[0].plain_text
    assert partial.startswith(ANSWER[:30]) and partial.endswith(INTERRUPTED_NOTE)
    finals = [s for s in telegram.sent if s.plain_text == "Second try, complete."]
    assert len(finals) == 1 and await stored_reply(store, DM_KEY) == "Second try, complete."


@asynccontextmanager
async def discord_stack(
    db_url: str, tmp_path: Path, reply: str
) -> AsyncIterator[tuple[FakeDiscord, Service]]:
    async with FakeDiscord() as discord_fake, FakeAnthropic() as llm_fake:
        llm_fake.pacing = Pacing(chunk_chars=40, delay=0.01)
        llm_fake.script(text_reply(reply))
        settings = base_settings(
            data_dir=tmp_path,
            database_url=db_url,
            anthropic_api_key="test",
            anthropic_base_url=llm_fake.base_url,
            llm={"max_retries": 0, "max_output_tokens": 8000},
            delivery={"edit_interval_seconds": 0.3},
        )
        service = await Service.build(settings, [make_adapter(discord_fake)], migrate=False)
        await service.start()
        try:
            yield discord_fake, service
        finally:
            await service.stop()


async def test_a_long_discord_reply_continues_in_new_messages_without_breaking_a_code_fence(
    db_url: str, tmp_path: Path, store: Store
) -> None:
    code = "```python\n" + "".join(f"print('line {n}')\n" for n in range(90)) + "```"
    reply = "Here is the script:\n\n" + code + "\n\nThat is all. " + "More words follow here. " * 40
    async with discord_stack(db_url, tmp_path, reply) as (discord_fake, service):
        dm(discord_fake, "write me a script")
        await until(lambda: join_parts([s.content for s in discord_fake.sent]) == reply.strip(), within=30)
        await asyncio.wait_for(service.gateway.wait_idle(), 10)
        await service.delivery.flush()
        row = await store.outbox_for_inbox(1)
    contents = [s.content for s in discord_fake.sent]
    assert len(contents) >= 2 and all(len(c) <= 2000 for c in contents)
    # While it grows, one flush edits only the newest message; the last pass fixes the numbering.
    growing = [e for e in discord_fake.edits if e.at < discord_fake.edits[-1].at - 0.05]
    gaps = [b.at - a.at for a, b in itertools.pairwise(growing)]
    assert all(gap >= 0.25 for gap in gaps), gaps
    assert all(c.count("```") % 2 == 0 for c in contents)  # every part closes the fences it opens
    assert (
        row is not None
        and row.text == reply.strip()
        and row.delivered_ids == [str(s.message_id) for s in discord_fake.sent]
    )
    assert all(s.channel_id == DM_CHANNEL for s in discord_fake.sent)


async def test_a_crash_mid_stream_marks_the_partial_and_the_turn_is_answered_once_after_restart(
    tmp_path: Path,
) -> None:
    async with FakeTelegram() as telegram, FakeAnthropic(responder=ChatResponder()) as anthropic:
        anthropic.pacing = Pacing(chunk_chars=4, delay=0.1)  # slow enough to be killed mid-answer
        anthropic.script(text_reply(ANSWER), text_reply("Answered after the restart."))
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
        async with hygieia_run(env, tmp_path) as proc:
            await until(lambda: bool(telegram.calls("getUpdates")), within=60)
            telegram.push_message(ALICE, "a long question", user_id=ALICE)
            await until(lambda: bool(telegram.sent) and bool(telegram.edits), within=60)
            proc.kill()  # a crash: no chance to finish or to tidy up
            await proc.wait()
        partial = telegram.sent[0]
        assert ANSWER.startswith(partial.plain_text.strip()) and partial.plain_text != ANSWER

        async with hygieia_run(env, tmp_path) as proc:
            await until(lambda: RESTART_NOTE in telegram.message_text(ALICE, partial.message_id), within=90)
            await until(lambda: any(s.plain_text.startswith("Answered") for s in telegram.sent), within=90)
            stderr = await sigterm_and_wait(proc)

    assert proc.returncode == 0, stderr
    assert [s.plain_text for s in telegram.sent[1:]] == ["Answered after the restart."]  # answered once
    assert len(anthropic.message_requests) == 2
