"""The outbox worker: split to the platform limit, send in order, retry with backoff, give up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gateway.delivery import Delivery
from gateway.splitter import join_parts
from gateway.store.repository import Store
from tests.gateway.conftest import RecordingAdapter

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
