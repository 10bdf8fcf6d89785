"""A slow compaction is visible in the chat: typing meanwhile, and once it has run longer than
``sessions.summarizing_notice_seconds`` the one-line "being summarized" notice, sent once.

Through the whole service as ``hygieia run`` wires it (gateway.runner.Service): the real
python-telegram-bot against the fake Bot API, the real anthropic SDK against the fake Messages
API whose summary model is slow, streaming on (Telegram's default), both engines.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent.tokens import estimate_messages_tokens
from agent.types import ChatMessage
from gateway.outbound.failures import SUMMARIZING
from gateway.serving.hygiene import SUMMARIZING_NOTICE
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import FakeTelegram
from tests.gateway.conftest import MODEL, ChatResponder
from tests.gateway.platforms.telegram_bot.test_telegram_service import ALICE, DM_KEY, make_settings, serving

WINDOW = 8_000
SUMMARY_MODEL = "claude-haiku-4-5"
FILLER = "the quick brown fox jumps over the lazy dog while the band plays on " * 6


def test_the_notice_is_the_one_sentence_the_architecture_names() -> None:
    # One text for "a compaction is running" (failures.SUMMARIZING is what a retried turn says).
    assert SUMMARIZING_NOTICE == SUMMARIZING == "This conversation is being summarized, one moment."


async def _grown_dm(store: Store, system_prompt: str) -> None:
    """Alice's DM, grown to 90% of the window while the bot was away (the next turn compacts first)."""
    info = await store.get_or_create_session(
        DM_KEY,
        platform="telegram",
        chat_id=str(ALICE),
        user_id=str(ALICE),
        system_prompt=system_prompt,
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


@pytest.mark.parametrize(("summary_seconds", "notices"), [(1.5, 1), (0.0, 0)])
async def test_a_slow_summary_model_shows_typing_and_one_summarizing_notice_in_telegram(
    tmp_path: Path, db_url: str, store: Store, summary_seconds: float, notices: int
) -> None:
    async with (
        FakeTelegram() as telegram,
        FakeAnthropic(context_window=WINDOW, responder=ChatResponder()) as anthropic,
    ):
        anthropic.model_delays = {SUMMARY_MODEL: summary_seconds}
        settings = make_settings(
            tmp_path,
            db_url,
            telegram,
            anthropic,
            context_window=WINDOW,
            summary_model=SUMMARY_MODEL,
            sessions={"turn_grace_seconds": 0.2, "summarizing_notice_seconds": 0.4},
            delivery={"streaming": True},
        )
        await _grown_dm(store, settings.sessions.system_prompt)
        async with serving(settings) as service:
            telegram.push_message(ALICE, "are you there?", user_id=ALICE)
            await telegram.wait_for_sent(1 + notices, timeout=20)
            await asyncio.wait_for(service.gateway.wait_idle(), 20)
            sent = list(telegram.sent)
            info = await store.current_session(DM_KEY)
            assert info is not None
            compactions = await store.list_compactions(info.id)

    texts = [telegram.message_text(s.chat_id, s.message_id) for s in sent]  # streamed ones as edited last
    assert texts[-1] == "reply: are you there?"
    assert texts.count(SUMMARIZING_NOTICE) == notices and texts[:notices] == [SUMMARIZING_NOTICE] * notices
    assert [c.trigger for c in compactions] == ["hygiene"]
    summary_calls = [r for r in anthropic.message_requests if r["model"] == SUMMARY_MODEL]
    assert len(summary_calls) == 1
    # Typing was shown before anything was sent: while the summary model worked.
    first_send = next(c.at for c in telegram.requests if c.method == "sendMessage")
    assert any(c.at < first_send for c in telegram.calls("sendChatAction"))
