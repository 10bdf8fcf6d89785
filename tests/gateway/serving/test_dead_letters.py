"""Inbox dead letters: a message that fails every time is set aside after N tries, its sender is
told once, and the chat's other messages are answered meanwhile. Transient failures still retry."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from gateway.outbound.failures import SET_ASIDE
from gateway.store.repository import Store
from tests.fakes.anthropic import error_reply, text_reply
from tests.gateway.conftest import Rig, gateway_rig

KEY = "test:dm:chat-1"


async def put_unreadable(rig: Rig, message_id: str = "poison-1", **payload: Any) -> int:
    """An inbox row the code cannot read (an older version wrote ``truncated_from`` as text)."""
    body = {
        "text": "the poisoned one",
        "user_id": "u1",
        "user_name": "Ann",
        "chat_type": "dm",
        "timestamp": "2026-11-29T14:01:00+00:00",
        "truncated_from": "a lot",
        **payload,
    }
    inbox_id, _ = await rig.store.inbox_put(
        platform="test",
        chat_id="chat-1",
        platform_message_id=message_id,
        session_key=KEY,
        payload=body,
        addressed=True,
    )
    return inbox_id


async def until_idle(rig: Rig, within: float = 20.0) -> None:
    """Until no timer or worker is left (retries included), then deliver what is due."""
    deadline = time.monotonic() + within
    while True:
        await rig.settle(within)
        if not rig.gateway.busy_keys and rig.gateway._timers == {}:
            return
        if time.monotonic() > deadline:
            raise AssertionError("the gateway never went idle")
        await asyncio.sleep(0.05)


async def test_a_message_that_always_fails_is_set_aside_and_the_next_one_is_answered(store: Store) -> None:
    async with gateway_rig(store, delivery={"inbox_max_attempts": 3}) as rig:
        poison = await put_unreadable(rig)
        await rig.say("hello after it")
        await until_idle(rig)

        item = await store.inbox_get(poison)
        assert item.status == "failed" and item.attempts == 3
        assert item.error is not None and "ValueError" in item.error
        assert sorted(rig.adapter.texts) == sorted(["reply: hello after it", SET_ASIDE])
        notice = next(s for s in rig.adapter.sent if s.text == SET_ASIDE)
        assert notice.target.reply_to_message_id == "poison-1"
        assert (await store.inbox_get(poison + 1)).status == "done"


async def test_the_sender_is_told_once_however_often_the_chat_is_served_again(store: Store) -> None:
    async with gateway_rig(store, delivery={"inbox_max_attempts": 2}) as rig:
        await put_unreadable(rig)
        await rig.say("one")
        await until_idle(rig)
        await rig.say("two")
        await until_idle(rig)

    assert rig.adapter.texts.count(SET_ASIDE) == 1
    assert "reply: one" in rig.adapter.texts and "reply: two" in rig.adapter.texts


async def test_a_message_that_was_claimed_too_often_is_set_aside_without_serving_it(store: Store) -> None:
    async with gateway_rig(store, start=False, delivery={"inbox_max_attempts": 3}) as rig:
        poison = await put_unreadable(rig, truncated_from=None)  # readable, but it kept killing workers
        for worker in ("w1", "w2", "w3"):
            [claimed] = await store.inbox_claim(worker=worker, lease_seconds=-1, session_key=KEY)
            assert claimed.id == poison
        await rig.delivery.start()
        await rig.gateway.start()
        await until_idle(rig)

        item = await store.inbox_get(poison)
        assert item.status == "failed" and item.error is not None and "3 attempts" in item.error
        assert rig.adapter.texts == [SET_ASIDE]
        assert rig.responder.chat_bodies == []


async def test_a_graceful_stop_does_not_count_as_an_attempt(store: Store) -> None:
    async with gateway_rig(store, start=False) as rig:
        item_id = await put_unreadable(rig, truncated_from=None)
        await store.inbox_claim(worker="w1", lease_seconds=60, session_key=KEY)
        await store.inbox_release(worker="w1")

    assert (await store.inbox_get(item_id)).attempts == 0


async def test_an_overloaded_model_is_retried_and_not_set_aside(store: Store) -> None:
    async with gateway_rig(store, delivery={"inbox_max_attempts": 2}) as rig:
        rig.fake.script(
            error_reply(529, "overloaded_error", "Overloaded"),
            error_reply(529, "overloaded_error", "Overloaded"),
            text_reply("finally"),
        )
        await rig.say("are you there?")
        await until_idle(rig)

    assert rig.adapter.texts[-1] == "finally"
    assert SET_ASIDE not in rig.adapter.texts
    assert (await store.inbox_get(1)).status == "done"


async def test_dead_letters_of_a_session_list_the_set_aside_message(store: Store) -> None:
    async with gateway_rig(store, delivery={"inbox_max_attempts": 2}) as rig:
        poison = await put_unreadable(rig)
        await rig.say("hi")
        await until_idle(rig)
        info = await store.get_session(await rig.session_id())

    [dead] = await store.dead_letters(info)
    assert (dead.source, dead.id, dead.attempts) == ("inbox", poison, 2)
    assert dead.text == "the poisoned one" and dead.error is not None and "ValueError" in dead.error
