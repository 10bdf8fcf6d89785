"""The durable inbox (idempotent intake, claim with a lease) and the outbox lifecycle."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from agent.clock import utcnow
from gateway.store.repository import Store
from tests.store.helpers import new_session


async def put(store: Store, pmid: str | None, key: str = "tg:1", chat: str = "1") -> tuple[int, bool]:
    return await store.inbox_put(
        platform="telegram",
        chat_id=chat,
        platform_message_id=pmid,
        session_key=key,
        payload={"text": f"hello {pmid}"},
        addressed=True,
    )


async def test_inbox_put_is_idempotent_on_the_platform_message_id(store: Store) -> None:
    first_id, created = await put(store, "100")
    again_id, created_again = await put(store, "100")
    assert created and not created_again and again_id == first_id
    other_chat, created_other = await put(store, "100", chat="2")
    assert created_other and other_chat != first_id


async def test_inbox_items_without_platform_id_are_all_kept(store: Store) -> None:
    a, b = await put(store, None), await put(store, None)
    assert a[1] and b[1] and a[0] != b[0]


async def test_concurrent_duplicate_puts_store_one_item(store: Store) -> None:
    results = await asyncio.gather(*(put(store, "dup") for _ in range(6)))
    assert len({i for i, _ in results}) == 1 and sum(created for _, created in results) == 1


async def test_claim_takes_oldest_pending_and_leases_them(store: Store) -> None:
    ids = [(await put(store, str(i)))[0] for i in range(3)]
    claimed = await store.inbox_claim(worker="w1", lease_seconds=60, limit=2)
    assert [r.id for r in claimed] == ids[:2]
    assert all(r.status == "processing" and r.attempts == 1 and r.lease_owner == "w1" for r in claimed)
    assert claimed[0].payload == {"text": "hello 0"}
    assert [r.id for r in await store.inbox_claim(worker="w2", lease_seconds=60)] == ids[2:]
    assert await store.inbox_claim(worker="w3", lease_seconds=60) == []


async def test_expired_lease_is_claimed_again(store: Store) -> None:
    item, _ = await put(store, "1")
    await store.inbox_claim(worker="dead", lease_seconds=-1)  # lease already over
    [again] = await store.inbox_claim(worker="alive", lease_seconds=60)
    assert again.id == item and again.lease_owner == "alive" and again.attempts == 2


async def test_claim_by_session_key(store: Store) -> None:
    await put(store, "1", key="a")
    b, _ = await put(store, "2", key="b")
    assert [r.id for r in await store.inbox_claim(worker="w", lease_seconds=60, session_key="b")] == [b]


async def test_concurrent_claims_never_share_an_item(store: Store) -> None:
    for i in range(10):
        await put(store, str(i))
    batches = await asyncio.gather(
        *(store.inbox_claim(worker=f"w{n}", lease_seconds=60, limit=3) for n in range(5))
    )
    claimed = [r.id for batch in batches for r in batch]
    assert len(claimed) == len(set(claimed)) == 10


async def test_a_session_held_by_another_worker_is_not_claimed(store: Store) -> None:
    await put(store, "1", key="s")
    [held] = await store.inbox_claim(worker="w1", lease_seconds=60, session_key="s")
    second, _ = await put(store, "2", key="s")
    assert await store.inbox_claim(worker="w2", lease_seconds=60, session_key="s") == []
    # The holder itself takes the newcomer; once it is done, the session is free again.
    assert [r.id for r in await store.inbox_claim(worker="w1", lease_seconds=60, session_key="s")] == [second]
    await store.inbox_mark([held.id, second], "done")
    third, _ = await put(store, "3", key="s")
    assert [r.id for r in await store.inbox_claim(worker="w2", lease_seconds=60, session_key="s")] == [third]


async def test_a_dead_holders_session_is_claimable_once_its_lease_ran_out(store: Store) -> None:
    await put(store, "1", key="s")
    await store.inbox_claim(worker="dead", lease_seconds=-1, session_key="s")
    await put(store, "2", key="s")
    claimed = await store.inbox_claim(worker="alive", lease_seconds=60, session_key="s")
    assert len(claimed) == 2 and {r.lease_owner for r in claimed} == {"alive"}


async def test_concurrent_claims_for_one_session_go_to_one_worker(store: Store) -> None:
    for i in range(6):
        await put(store, str(i), key="s")
    batches = await asyncio.gather(
        *(store.inbox_claim(worker=f"w{n}", lease_seconds=60, session_key="s", limit=2) for n in range(4))
    )
    owners = {r.lease_owner for batch in batches for r in batch}
    assert len(owners) == 1 and sum(len(b) for b in batches) == 2


async def test_renewing_keeps_a_long_turns_lease(store: Store) -> None:
    await put(store, "1", key="s")
    await store.inbox_claim(worker="w1", lease_seconds=5, session_key="s")  # about to expire
    assert await store.inbox_renew(worker="w1", lease_seconds=60) == 1
    assert await store.inbox_claim(worker="w2", lease_seconds=60, session_key="s") == []


async def test_renewing_does_not_bring_back_a_lease_that_ran_out(store: Store) -> None:
    # Its turn's next write is refused by the fence and the turn is dropped: renewed, its items
    # would stay claimed by nobody serving them.
    await put(store, "1", key="s")
    await store.inbox_claim(worker="w1", lease_seconds=-1, session_key="s")
    assert await store.inbox_renew(worker="w1", lease_seconds=60) == 0
    assert len(await store.inbox_claim(worker="w2", lease_seconds=60, session_key="s")) == 1


async def test_releasing_one_session_hands_back_only_its_items(store: Store) -> None:
    await put(store, "1", key="a")
    await put(store, "2", key="b")
    await store.inbox_claim(worker="w1", lease_seconds=60, session_key="a")
    await store.inbox_claim(worker="w1", lease_seconds=60, session_key="b")
    assert await store.inbox_release(worker="w1", session_key="a") == 1
    assert len(await store.inbox_claim(worker="w2", lease_seconds=60, session_key="a")) == 1
    assert await store.inbox_claim(worker="w2", lease_seconds=60, session_key="b") == []


async def test_marked_items_are_finished(store: Store) -> None:
    a, _ = await put(store, "1", key="a")
    b, _ = await put(store, "2", key="b")
    assert await store.inbox_pending_keys() == ["a", "b"]
    await store.inbox_claim(worker="w", lease_seconds=60)
    await store.inbox_mark([a], "done", message_id=None)
    await store.inbox_mark([b], "failed", error="boom")
    assert await store.inbox_pending_keys() == []
    assert await store.inbox_claim(worker="w", lease_seconds=-1) == []
    failed = await store.inbox_get(b)
    assert (failed.status, failed.error) == ("failed", "boom")


async def test_outbox_lifecycle(store: Store) -> None:
    sid = await new_session(store)
    inbox_id, _ = await put(store, "9")
    out = await store.outbox_put(
        session_id=sid,
        target={"platform": "telegram", "chat_id": "1"},
        text="reply",
        inbox_ids=[inbox_id],
        message_id=None,
    )
    now = utcnow()
    [due] = await store.outbox_due(now)
    assert (due.id, due.status, due.text, due.inbox_ids) == (out, "pending", "reply", [inbox_id])

    await store.outbox_mark_retry(out, next_attempt_at=now + timedelta(minutes=1), error="429")
    assert await store.outbox_due(now) == []
    [retry] = await store.outbox_due(now + timedelta(minutes=2))
    assert (retry.attempts, retry.error) == (1, "429")

    await store.outbox_mark_sent(out, ["m1", "m2"])
    sent = await store.outbox_get(out)
    assert (sent.status, sent.delivered_ids, sent.attempts) == ("sent", ["m1", "m2"], 2)
    assert sent.sent_at is not None and sent.sent_at.tzinfo is not None
    assert await store.outbox_due(now + timedelta(days=1)) == []


async def test_outbox_failed_is_not_due(store: Store) -> None:
    out = await store.outbox_put(session_id=None, target={}, text="x", inbox_ids=[], message_id=None)
    await store.outbox_mark_failed(out, "blocked by user")
    assert (await store.outbox_get(out)).status == "failed"
    assert await store.outbox_due(utcnow()) == []


async def test_outbox_for_inbox_finds_the_latest_reply(store: Store) -> None:
    a, _ = await put(store, "1")
    b, _ = await put(store, "2")
    await store.outbox_put(session_id=None, target={}, text="first", inbox_ids=[a, b], message_id=None)
    latest = await store.outbox_put(session_id=None, target={}, text="second", inbox_ids=[b], message_id=None)
    found = await store.outbox_for_inbox(b)
    assert found is not None and found.id == latest
    found_a = await store.outbox_for_inbox(a)
    assert found_a is not None and found_a.text == "first"
    assert await store.outbox_for_inbox(999) is None


async def _reply(store: Store, platform: str = "telegram") -> int:
    sid = await new_session(store)
    return await store.outbox_put(
        session_id=sid,
        target={"platform": platform, "chat_id": "1"},
        text="hi",
        inbox_ids=[],
        message_id=None,
    )


async def test_a_claimed_reply_is_not_due_for_another_worker_until_its_lease_passes(store: Store) -> None:
    row = await _reply(store)
    [taken] = await store.outbox_claim(now=utcnow(), lease_seconds=1, platforms=["telegram"])
    assert taken.id == row
    assert await store.outbox_claim(now=utcnow(), lease_seconds=1, platforms=["telegram"]) == []
    again: list[int] = []
    for _ in range(100):  # the first worker died mid-send: due again once its lease passes
        again = [
            r.id for r in await store.outbox_claim(now=utcnow(), lease_seconds=60, platforms=["telegram"])
        ]
        if again:
            break
        await asyncio.sleep(0.05)
    assert again == [row]


async def test_replies_for_a_platform_this_worker_does_not_run_are_left_alone(store: Store) -> None:
    discord = await _reply(store, "discord")
    assert await store.outbox_claim(now=utcnow(), lease_seconds=60, platforms=["telegram"]) == []
    assert [
        r.id for r in await store.outbox_claim(now=utcnow(), lease_seconds=60, platforms=["discord"])
    ] == [discord]


async def test_concurrent_delivery_rounds_never_take_one_reply_twice(store: Store) -> None:
    rows = [await _reply(store) for _ in range(8)]
    batches = await asyncio.gather(
        *(
            store.outbox_claim(now=utcnow(), lease_seconds=60, platforms=["telegram"], limit=3)
            for _ in range(4)
        )
    )
    taken = [r.id for batch in batches for r in batch]
    assert sorted(taken) == rows
