"""Dead letters in the admin API: every chat's, and one session's."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.store.repository import Store
from tests.gateway.admin_support import admin_client
from tests.store.helpers import new_session

TARGET = {"platform": "telegram", "chat_id": "100", "thread_id": None, "reply_to_message_id": None}


async def seed_dead_letters(store: Store) -> tuple[str, int, int]:
    """A session with one message set aside and one reply given up on."""
    session_id = await new_session(store, "telegram:100", chat_id="100")
    inbox_id, _ = await store.inbox_put(
        platform="telegram",
        chat_id="100",
        platform_message_id="100:7",
        session_key="telegram:100",
        payload={"text": "the message that failed"},
        addressed=True,
    )
    await store.inbox_claim(worker="w", lease_seconds=60, session_key="telegram:100")
    [dead] = await store.inbox_fail(
        [inbox_id], worker="w", error="ValueError: bad row", max_attempts=1, retry_at=datetime.now(UTC)
    )
    assert dead.id == inbox_id
    outbox_id = await store.outbox_put(
        session_id=session_id, target=TARGET, text="a reply", inbox_ids=[], message_id=None
    )
    await store.outbox_mark_failed(outbox_id, "Bad Request: chat not found")
    return session_id, inbox_id, outbox_id


async def test_the_api_lists_a_sessions_dead_letters_with_their_errors(store: Store) -> None:
    session_id, inbox_id, outbox_id = await seed_dead_letters(store)
    async with admin_client(store) as client:
        response = await client.get(f"/api/sessions/{session_id}/dead-letters")
    assert response.status_code == 200
    rows = {(d["source"], d["id"]): d for d in response.json()}
    assert set(rows) == {("inbox", inbox_id), ("outbox", outbox_id)}
    assert rows[("inbox", inbox_id)]["error"] == "ValueError: bad row"
    assert rows[("inbox", inbox_id)]["text"] == "the message that failed"
    assert rows[("outbox", outbox_id)]["error"] == "Bad Request: chat not found"


async def test_the_api_lists_every_chats_dead_letters(store: Store) -> None:
    await seed_dead_letters(store)
    async with admin_client(store) as client:
        response = await client.get("/api/dead-letters?limit=1")
        unknown = await client.get("/api/sessions/nope/dead-letters")
    assert response.status_code == 200 and len(response.json()) == 1
    assert unknown.status_code == 404
