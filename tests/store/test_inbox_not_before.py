"""An inbox item stored with a not-before time (a webhook's coalescing window) waits for it."""

from __future__ import annotations

from datetime import datetime, timedelta

from agent.clock import utcnow
from gateway.store.repository import Store


async def put(store: Store, pmid: str, not_before: datetime | None) -> int:
    inbox_id, _ = await store.inbox_put(
        platform="telegram",
        chat_id="1",
        platform_message_id=pmid,
        session_key="telegram:dm:1",
        payload={"text": pmid},  # type: ignore[typeddict-item]
        addressed=True,
        not_before=not_before,
    )
    return inbox_id


async def test_an_item_is_not_claimed_before_its_time(store: Store) -> None:
    await put(store, "later", utcnow() + timedelta(seconds=60))
    assert await store.inbox_claim(worker="w", lease_seconds=30) == []
    assert await store.inbox_pending_keys() == []


async def test_an_item_whose_time_has_come_is_claimed(store: Store) -> None:
    inbox_id = await put(store, "due", utcnow() - timedelta(seconds=1))
    assert [r.id for r in await store.inbox_claim(worker="w", lease_seconds=30)] == [inbox_id]


async def test_waiting_keys_are_listed_with_their_first_due_time(store: Store) -> None:
    soon = utcnow() + timedelta(seconds=30)
    await put(store, "a", soon + timedelta(seconds=10))
    await put(store, "b", soon)
    await put(store, "now", None)
    [(key, due)] = (await store.inbox_waiting()).items()
    assert key == "telegram:dm:1"
    assert abs((due - soon).total_seconds()) < 1.0
