"""The outbox worker: split to the platform limit, send in order, retry with backoff, give up."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from gateway.errors import AdapterError
from gateway.outbound.delivery import Delivery
from gateway.outbound.failures import UNDELIVERED
from gateway.splitter import join_parts
from gateway.store.repository import Store
from tests.gateway.conftest import RecordingAdapter
from tests.store.engines import only

TARGET = {"platform": "test", "chat_id": "c1", "thread_id": None, "reply_to_message_id": "m9"}


async def _session(store: Store) -> str:
    info = await store.get_or_create_session(
        "test:dm:c1", platform="test", chat_id="c1", system_prompt="s", model="m"
    )
    return info.id


async def test_a_long_reply_is_split_within_the_limit_and_sent_in_order(store: Store) -> None:
    adapter = RecordingAdapter()
    adapter.text_limit = 100
    text = "\n\n".join(f"Paragraph {i}: " + "words " * 12 for i in range(8))
    outbox_id = await store.outbox_put(
        session_id=await _session(store), target=TARGET, text=text, inbox_ids=[], message_id=None
    )
    delivery = Delivery(store, {"test": adapter})

    await delivery.flush()

    assert len(adapter.sent) > 1
    assert all(len(part) <= 100 for part in adapter.texts)
    assert join_parts(adapter.texts) == text
    assert adapter.sent[0].target.reply_to_message_id == "m9"
    assert all(s.target.reply_to_message_id is None for s in adapter.sent[1:])
    record = await store.outbox_get(outbox_id)
    assert record.status == "sent" and len(record.delivered_ids) == len(adapter.sent)


# Steps the delivery clock through retries: SQLite only (PostgreSQL judges due rows by its own).
@only("sqlite")
async def test_a_transient_failure_is_retried_with_exponential_backoff(store: Store) -> None:
    adapter = RecordingAdapter()
    adapter.fail_next = 2
    now = [datetime.now(UTC) + timedelta(seconds=1)]
    delivery = Delivery(store, {"test": adapter}, base_delay=2.0, clock=lambda: now[0])
    outbox_id = await store.outbox_put(
        session_id=await _session(store), target=TARGET, text="hi", inbox_ids=[], message_id=None
    )

    await delivery.flush()
    first = await store.outbox_get(outbox_id)
    assert first.status == "pending" and first.next_attempt_at == now[0] + timedelta(seconds=2)
    now[0] += timedelta(seconds=2)
    await delivery.flush()
    second = await store.outbox_get(outbox_id)
    assert second.next_attempt_at == now[0] + timedelta(seconds=4)
    now[0] += timedelta(seconds=4)
    await delivery.flush()

    assert adapter.texts == ["hi"]
    assert (await store.outbox_get(outbox_id)).status == "sent"


# Steps the delivery clock through retries: SQLite only (PostgreSQL judges due rows by its own).
@only("sqlite")
async def test_delivery_gives_up_after_max_attempts(store: Store) -> None:
    adapter = RecordingAdapter()
    adapter.fail_next = 100
    now = [datetime.now(UTC) + timedelta(seconds=1)]
    delivery = Delivery(store, {"test": adapter}, max_attempts=3, clock=lambda: now[0])
    outbox_id = await store.outbox_put(
        session_id=await _session(store), target=TARGET, text="hi", inbox_ids=[], message_id=None
    )

    for _ in range(5):
        await delivery.flush()
        now[0] += timedelta(hours=1)

    record = await store.outbox_get(outbox_id)
    assert record.status == "failed" and record.attempts == 3
    assert adapter.sent == []


async def test_a_reply_for_a_platform_not_running_here_is_left_for_a_worker_that_runs_it(
    store: Store,
) -> None:
    delivery = Delivery(store, {})
    outbox_id = await store.outbox_put(
        session_id=await _session(store), target=TARGET, text="hi", inbox_ids=[], message_id=None
    )

    await delivery.flush()

    record = await store.outbox_get(outbox_id)
    assert record.status == "pending" and record.attempts == 0
    assert record.next_attempt_at <= datetime.now(UTC)  # still due, for whoever runs that platform


async def test_a_reply_of_backticks_goes_out_in_a_few_messages(store: Store) -> None:
    adapter = RecordingAdapter()
    adapter.text_limit = 2000
    text = "`" * 3031
    await store.outbox_put(
        session_id=await _session(store), target=TARGET, text=text, inbox_ids=[], message_id=None
    )

    await Delivery(store, {"test": adapter}).flush()

    assert 1 < len(adapter.sent) <= 3
    assert all(len(part) <= 2000 for part in adapter.texts)
    assert join_parts(adapter.texts) == text


async def test_a_reply_longer_than_the_maximum_parts_is_cut_with_a_note(store: Store) -> None:
    adapter = RecordingAdapter()
    adapter.text_limit = 500
    text = " ".join(f"word{i}" for i in range(3000))
    outbox_id = await store.outbox_put(
        session_id=await _session(store), target=TARGET, text=text, inbox_ids=[], message_id=None
    )

    await Delivery(store, {"test": adapter}, max_parts=4).flush()

    assert len(adapter.sent) == 4
    assert "Ask me to continue from the last words above" in adapter.texts[-1]
    assert (await store.outbox_get(outbox_id)).status == "sent"


# --- dead letters ------------------------------------------------------------------------------


async def _rounds(delivery: Delivery, now: list[datetime], count: int) -> None:
    for _ in range(count):
        await delivery.flush()
        now[0] += timedelta(hours=1)


# Steps the delivery clock through retries: SQLite only (PostgreSQL judges due rows by its own).
@only("sqlite")
async def test_a_reply_the_platform_always_refuses_becomes_a_dead_letter_and_the_chat_is_told_once(
    store: Store,
) -> None:
    adapter = RecordingAdapter()
    adapter.refuse = lambda text: AdapterError("Bad Request: message is too long") if "BAD" in text else None
    now = [datetime.now(UTC) + timedelta(seconds=1)]
    delivery = Delivery(store, {"test": adapter}, max_attempts=3, clock=lambda: now[0])
    session_id = await _session(store)
    bad = await store.outbox_put(
        session_id=session_id, target=TARGET, text="BAD", inbox_ids=[], message_id=None
    )
    good = await store.outbox_put(
        session_id=session_id, target=TARGET, text="fine", inbox_ids=[], message_id=None
    )

    await _rounds(delivery, now, 6)

    failed = await store.outbox_get(bad)
    assert failed.status == "failed" and failed.attempts == 3
    assert failed.error is not None and "message is too long" in failed.error
    assert (await store.outbox_get(good)).status == "sent"
    assert adapter.texts[0] == "fine"
    [notice] = adapter.texts[1:]
    assert notice == UNDELIVERED
    assert adapter.sent[-1].target.reply_to_message_id is None


# Steps the delivery clock through retries: SQLite only (PostgreSQL judges due rows by its own).
@only("sqlite")
async def test_a_reply_that_crashes_the_adapter_does_not_stop_the_round(store: Store) -> None:
    adapter = RecordingAdapter()
    adapter.refuse = lambda text: ValueError("invalid literal for int()") if text == "crash" else None
    now = [datetime.now(UTC) + timedelta(seconds=1)]
    delivery = Delivery(store, {"test": adapter}, max_attempts=2, clock=lambda: now[0])
    session_id = await _session(store)
    crash = await store.outbox_put(
        session_id=session_id, target=TARGET, text="crash", inbox_ids=[], message_id=None
    )
    await store.outbox_put(session_id=session_id, target=TARGET, text="after", inbox_ids=[], message_id=None)
    other_chat = {**TARGET, "chat_id": "c2"}
    await store.outbox_put(
        session_id=session_id, target=other_chat, text="elsewhere", inbox_ids=[], message_id=None
    )

    await delivery.flush()
    assert sorted(adapter.texts) == ["after", "elsewhere"]
    first = await store.outbox_get(crash)
    assert first.status == "pending" and first.next_attempt_at > now[0]  # backed off, not hot-looped

    await _rounds(delivery, now, 4)
    dead = await store.outbox_get(crash)
    assert dead.status == "failed" and dead.error is not None and "ValueError" in dead.error
    assert adapter.texts.count(UNDELIVERED) == 1


# Steps the delivery clock through retries: SQLite only (PostgreSQL judges due rows by its own).
@only("sqlite")
async def test_a_failure_notice_that_cannot_be_delivered_is_not_followed_by_another(store: Store) -> None:
    adapter = RecordingAdapter()
    adapter.refuse = lambda text: AdapterError("Forbidden: bot was blocked by the user")
    now = [datetime.now(UTC) + timedelta(seconds=1)]
    delivery = Delivery(store, {"test": adapter}, max_attempts=2, clock=lambda: now[0])
    await store.outbox_put(
        session_id=await _session(store), target=TARGET, text="hi", inbox_ids=[], message_id=None
    )

    await _rounds(delivery, now, 12)

    dead = await store.dead_letters(await store.get_session(await _session(store)))
    assert [(d.source, d.text) for d in dead] == [("outbox", UNDELIVERED), ("outbox", "hi")]
    assert await store.outbox_due(now[0]) == []


async def test_a_failed_send_goes_out_again_when_its_retry_is_due_not_a_poll_later(store: Store) -> None:
    adapter = RecordingAdapter()
    adapter.fail_next = 1
    delivery = Delivery(store, {"test": adapter}, base_delay=0.2, poll_seconds=60.0)
    await store.outbox_put(
        session_id=await _session(store), target=TARGET, text="hi", inbox_ids=[], message_id=None
    )
    async with delivery:
        for _ in range(100):  # 5 s, against the 60 s poll the retry waited for before
            if adapter.texts:
                break
            await asyncio.sleep(0.05)
        assert adapter.texts == ["hi"]  # before stopping, whose last round would send it anyway
