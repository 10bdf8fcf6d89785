"""A flood of dead letters stays bounded (rows kept per chat, rows and characters shown), and one
chat's dead letters never show in another's admin views."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, select

from gateway.store.models import inbox
from gateway.store.repository import Store
from tests.gateway.admin_support import admin_client
from tests.store.helpers import new_session

FLOOD = 120
KEEP = 40
LONG = "flood " * 5_000


async def fail_messages(store: Store, chat: str, n: int, text: str, *, keep: int = KEEP) -> None:
    key = f"telegram:{chat}"
    ids = []
    for i in range(n):
        inbox_id, _ = await store.inbox_put(
            platform="telegram",
            chat_id=chat,
            platform_message_id=f"{chat}:{i}",
            session_key=key,
            payload={"text": f"{text} #{i}", "user_id": chat},
            addressed=True,
        )
        ids.append(inbox_id)
    claimed = await store.inbox_claim(worker="w", lease_seconds=60, session_key=key, limit=n)
    assert len(claimed) == n
    await store.inbox_fail(
        ids, worker="w", error="ValueError: x", max_attempts=1, retry_at=datetime.now(UTC), keep_failed=keep
    )


async def failed_rows(store: Store, chat: str) -> int:
    async with store.db.engine.connect() as conn:
        stmt = select(func.count()).where(inbox.c.status == "failed", inbox.c.chat_id == chat)
        return int(await conn.scalar(stmt) or 0)


async def test_a_flood_keeps_only_the_newest_dead_letters_of_the_chat(store: Store) -> None:
    await new_session(store, "telegram:1", chat_id="1")
    await fail_messages(store, "2", 5, "bob's own words", keep=KEEP)
    await fail_messages(store, "1", FLOOD, LONG)
    assert await failed_rows(store, "1") == KEEP
    assert await failed_rows(store, "2") == 5  # another chat's are not pushed out by the flood


async def test_a_flood_is_shown_bounded_and_never_in_another_chats_view(store: Store) -> None:
    ann = await new_session(store, "telegram:1", chat_id="1")
    bob = await new_session(store, "telegram:2", chat_id="2")
    await fail_messages(store, "1", FLOOD, LONG, keep=FLOOD)
    await fail_messages(store, "2", 3, "bob's own words", keep=FLOOD)
    async with admin_client(store) as client:
        everyone = await client.get("/api/dead-letters", params={"limit": 1000})
        bobs = await client.get(f"/api/sessions/{bob}/dead-letters")
        anns = await client.get(f"/api/sessions/{ann}/dead-letters", params={"limit": 50})
        bob_page = await client.get(f"/sessions/{bob}")
    assert everyone.status_code == 200 and len(everyone.json()) == FLOOD + 3
    assert max(len(d["text"]) for d in everyone.json()) <= 200
    assert len(everyone.content) < 200 * 1024
    assert {d["chat_id"] for d in bobs.json()} == {"2"} and len(bobs.json()) == 3
    assert len(anns.json()) == 50 and all("bob" not in d["text"] for d in anns.json())
    assert bob_page.status_code == 200 and "flood" not in bob_page.text
