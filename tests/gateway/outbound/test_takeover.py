"""A takeover finishes what the worker before left, once and in order.

The worker before ("dead") is written into the database as a frozen or killed node leaves it: its
claim on the chat lapsed, the user's message stored, a stream open under its lease showing the
messages it had posted at the Telegram fake. The running service then takes the chat over.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import text
from telegram import Bot

from agent.types import ChatMessage
from gateway.outbound.delivery import target_to_dict
from gateway.outbound.streaming import RESTART_NOTE
from gateway.platforms.base import InboundMessage, OutboundTarget
from gateway.serving.inbound import clean_text, inbox_payload, parse_item, user_message
from gateway.store import fence
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic, text_reply
from tests.fakes.telegram import FakeTelegram
from tests.gateway.conftest import MODEL, ChatResponder
from tests.gateway.platforms.telegram_bot.test_telegram_service import ALICE, make_settings, serving, until

DM_KEY = f"telegram:dm:{ALICE}"
TARGET = OutboundTarget("telegram", str(ALICE), None, "501")


async def left_by_a_dead_worker(
    store: Store, telegram: FakeTelegram, *, shown: str, answer: str | None
) -> int:
    """The chat as a worker that died mid-reply leaves it (before the service starts); the stream's id."""
    msg = InboundMessage(
        platform="telegram", chat_id=str(ALICE), user_id=str(ALICE), text="tell me",
        platform_message_id="501", user_name="Alice", chat_type="dm", addressed=True,
        timestamp=datetime.now(UTC),
    )  # fmt: skip
    await store.inbox_put(
        platform="telegram", chat_id=str(ALICE), platform_message_id="501", session_key=DM_KEY,
        payload=inbox_payload(msg, clean_text(msg.text, 10_000)), addressed=True,
    )  # fmt: skip
    info = await store.get_or_create_session(
        DM_KEY, platform="telegram", chat_id=str(ALICE), system_prompt="You are helpful.", model=MODEL
    )
    claim = await store.claim_turn(
        worker="dead", lease_seconds=60, session_key=DM_KEY,
        plan=lambda items, _: [user_message(parse_item(items[0]))],
    )  # fmt: skip
    assert claim.appended is not None
    if answer is not None:
        await store.append_turn(info.id, [ChatMessage.assistant(answer)], at=datetime.now(UTC))
    async with Bot(telegram.token, base_url=telegram.bot_base_url) as bot:  # what the dead worker posted
        posted = await bot.send_message(ALICE, shown)
    with fence.holding("dead", DM_KEY):
        stream = await store.stream_open(session_id=info.id, target=target_to_dict(TARGET))
        await store.stream_update(stream, message_ids=[f"{ALICE}:{posted.message_id}"], shown=[shown])
    async with store.db.transaction() as s:  # the dead worker's claim lapses
        await s.execute(
            text("UPDATE inbox SET lease_until = :past"), {"past": datetime(2020, 1, 1, tzinfo=UTC)}
        )
    return stream


async def stream_status(store: Store, stream: int) -> str:
    found = await store.stream_get(stream)
    assert found is not None
    return found.status


async def test_a_re_delivered_reply_edits_the_stream_that_shows_it_instead_of_sending_it_again(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    answer = "The whole answer, written before the worker froze."
    responder = ChatResponder()
    async with FakeTelegram() as telegram, FakeAnthropic(responder=responder) as anthropic:
        settings = make_settings(tmp_path, db_url, telegram, anthropic, delivery={})
        stream = await left_by_a_dead_worker(store, telegram, shown=answer[:30], answer=answer)
        async with serving(settings) as service:
            await until(lambda: _done(store, stream), within=15)
            await asyncio.wait_for(service.gateway.wait_idle(), 10)
        row = await store.outbox_for_inbox(1)
    assert [m.plain_text for m in telegram.sent] == [answer]  # edited in place, never sent twice
    assert responder.chat_bodies == []  # the answer was there: the model was not asked again
    assert (
        row is not None
        and row.status == "sent"
        and row.delivered_ids == [f"{ALICE}:{telegram.sent[0].message_id}"]
    )


async def _done(store: Store, stream: int) -> bool:
    return await stream_status(store, stream) == "done"


async def test_the_node_taking_a_chat_over_marks_the_orphaned_partial_interrupted_then_answers(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    async with FakeTelegram() as telegram, FakeAnthropic(responder=ChatResponder()) as anthropic:
        anthropic.script(text_reply("A fresh, complete answer."))
        settings = make_settings(tmp_path, db_url, telegram, anthropic, delivery={})
        stream = await left_by_a_dead_worker(store, telegram, shown="Half a sente", answer=None)
        async with serving(settings) as service:
            await until(
                lambda: len(telegram.sent) == 2 and telegram.sent[1].plain_text == "A fresh, complete answer."
            )
            await asyncio.wait_for(service.gateway.wait_idle(), 10)
            status = await stream_status(store, stream)
    partial = telegram.sent[0].plain_text
    assert partial.startswith("Half a sente") and partial.endswith(RESTART_NOTE)
    assert status == "interrupted"


async def test_recovery_leaves_streams_whose_lease_is_live_alone(store: Store) -> None:
    for worker, pmid in (("alive", "1"), ("dead", "2")):
        await store.inbox_put(
            platform="telegram", chat_id=pmid, platform_message_id=pmid, session_key=f"telegram:dm:{pmid}",
            payload={"text": pmid}, addressed=True,
        )  # fmt: skip
        await store.claim_turn(worker=worker, lease_seconds=60, session_key=f"telegram:dm:{pmid}")
        with fence.holding(worker, f"telegram:dm:{pmid}"):
            await store.stream_open(session_id=None, target={"platform": "telegram", "chat_id": pmid})
    async with store.db.transaction() as s:
        await s.execute(
            text("UPDATE inbox SET lease_until = :past WHERE lease_owner = 'dead'"),
            {"past": datetime(2020, 1, 1, tzinfo=UTC)},
        )
    orphans = await store.streams_orphaned(worker="starting")
    assert [o.lease_owner for o in orphans] == ["dead"]
    assert await store.streams_orphaned(worker="dead") == []  # never one's own


async def test_a_streamed_reply_waits_for_an_earlier_reply_of_the_chat_still_pending(
    tmp_path: Path, db_url: str, store: Store
) -> None:
    async with FakeTelegram() as telegram, FakeAnthropic(responder=ChatResponder()) as anthropic:
        anthropic.script(text_reply("The answer to the second message."))
        settings = make_settings(tmp_path, db_url, telegram, anthropic, delivery={})
        async with serving(settings) as service:
            # The answer to the first message, re-delivered by another node, not yet due here.
            row = await store.outbox_put(
                session_id=None, target=target_to_dict(TARGET), text="The answer to the first message.",
                inbox_ids=[], message_id=None,
            )  # fmt: skip
            async with store.db.transaction() as s:
                await s.execute(
                    text("UPDATE outbox SET next_attempt_at = :later WHERE id = :id"),
                    {"later": await store.db_now() + timedelta(seconds=6), "id": row},
                )
            telegram.push_message(ALICE, "second message", user_id=ALICE)
            await until(lambda: len(telegram.sent) == 2, within=20)
            await asyncio.wait_for(service.gateway.wait_idle(), 10)
    assert [m.plain_text for m in telegram.sent] == [
        "The answer to the first message.",
        "The answer to the second message.",
    ]
