"""Telegram drafts through the adapter against the fake's ``sendMessageDraft`` (the real method's
rules: private chats only, a non-zero draft id, 1-4096 characters after entity parsing)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.errors import DraftRefused
from gateway.platforms.base import OutboundTarget
from tests.fakes.telegram import FakeTelegram
from tests.gateway.inbox_recorder import Inbox
from tests.gateway.telegram_support import make_adapter, running

DM = OutboundTarget("telegram", "42")
GROUP = OutboundTarget("telegram", "-100555")
TOPIC = OutboundTarget("telegram", "42", thread_id="7")


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


async def test_a_draft_in_a_private_chat_is_shown_as_html_and_is_no_message(fake: FakeTelegram) -> None:
    async with running(fake, Inbox()) as adapter:
        await adapter.draft(DM, 5, "**Half** an answer")
    assert [(chat, draft_id, text) for chat, draft_id, text, _ in fake.drafts] == [(42, 5, "Half an answer")]
    assert fake.calls("sendMessageDraft")[0].params["parse_mode"] == "HTML"
    assert fake.sent == []


async def test_drafts_are_for_private_chats_outside_topics_only(fake: FakeTelegram) -> None:
    adapter = make_adapter(fake)
    assert adapter.drafts(DM) and not adapter.drafts(GROUP) and not adapter.drafts(TOPIC)


async def test_the_fake_refuses_a_draft_in_a_group(fake: FakeTelegram) -> None:
    async with running(fake, Inbox()) as adapter:
        with pytest.raises(DraftRefused):
            await adapter.draft(GROUP, 1, "hello")
    assert fake.calls("sendMessageDraft")[0].status == 400 and fake.drafts == []


async def test_a_refused_draft_turns_drafts_off_for_that_chat_only(fake: FakeTelegram) -> None:
    fake.fail_next("sendMessageDraft", 400, description="Bad Request: TEXTDRAFT_PEER_INVALID")
    async with running(fake, Inbox()) as adapter:
        with pytest.raises(DraftRefused):
            await adapter.draft(DM, 1, "hello")
        assert not adapter.drafts(DM) and not adapter.twin().drafts(DM)
        assert adapter.drafts(OutboundTarget("telegram", "43"))


async def test_the_fake_refuses_a_zero_draft_id_and_an_oversized_text(fake: FakeTelegram) -> None:
    async with running(fake, Inbox()) as adapter:
        bot = adapter._require_app().bot
        with pytest.raises(Exception, match="draft_id"):
            await bot.send_message_draft(42, 0, "hello")
        with pytest.raises(Exception, match="too long"):
            await bot.send_message_draft(42, 1, "x" * 4097)
    assert fake.drafts == []


async def test_a_draft_that_formats_to_nothing_is_skipped_without_turning_drafts_off(
    fake: FakeTelegram,
) -> None:
    fake.fail_next("sendMessageDraft", 400, description="Bad Request: message text is empty")
    async with running(fake, Inbox()) as adapter:
        await adapter.draft(DM, 1, "``")
        assert adapter.drafts(DM)
