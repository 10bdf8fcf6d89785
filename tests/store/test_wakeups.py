"""LISTEN/NOTIFY wake-ups: sent in the writing transaction, heard by a listener at once (PostgreSQL)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from gateway.store.repository import Store
from gateway.store.wakeups import INBOX_CHANNEL, OUTBOX_CHANNEL, Listener


def _postgres(store: Store) -> None:
    if store.db.dialect != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")


async def _listening(store: Store) -> tuple[Listener, asyncio.Queue[tuple[str, str]], list[int]]:
    heard: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    gaps: list[int] = []
    listener = Listener(
        store.db.url,
        {
            INBOX_CHANNEL: lambda key: heard.put_nowait((INBOX_CHANNEL, key)),
            OUTBOX_CHANNEL: lambda payload: heard.put_nowait((OUTBOX_CHANNEL, payload)),
        },
        on_gap=lambda: gaps.append(1),
    )
    listener.start()
    await asyncio.wait_for(listener.connected.wait(), 10)
    return listener, heard, gaps


async def _heard(heard: asyncio.Queue[tuple[str, str]], channel: str, payload: str) -> None:
    while True:
        got = await asyncio.wait_for(heard.get(), 2.0)
        if got == (channel, payload):  # the channel is database-wide: other tests' keys pass by
            return


async def test_an_inbox_write_wakes_a_listener_with_its_session_key(store: Store) -> None:
    _postgres(store)
    listener, heard, gaps = await _listening(store)
    key = f"telegram:{uuid.uuid4().hex}"
    try:
        await store.inbox_put(
            platform="telegram",
            chat_id="1",
            platform_message_id="10",
            session_key=key,
            payload={"text": "hi"},  # type: ignore[typeddict-item]
            addressed=True,
        )
        await _heard(heard, INBOX_CHANNEL, key)
        assert gaps == [1]  # told to catch up once, on connecting
    finally:
        await listener.stop()


async def test_an_outbox_write_wakes_a_listener(store: Store) -> None:
    _postgres(store)
    listener, heard, _gaps = await _listening(store)
    try:
        await store.outbox_put(
            session_id=None,
            target={"platform": "telegram", "chat_id": "1"},
            text="x",
            inbox_ids=[],
            message_id=None,
        )
        await _heard(heard, OUTBOX_CHANNEL, "")
    finally:
        await listener.stop()
