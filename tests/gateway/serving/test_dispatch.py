"""The Gateway: intake -> inbox -> turn -> outbox -> delivery, busy modes, exactly-once."""

from __future__ import annotations

import asyncio

from agent.types import ChatMessage
from gateway.serving.inbound import parse_item
from gateway.store.repository import Store
from tests.fakes.anthropic import text_reply
from tests.gateway.conftest import Rig, gateway_rig, inbound, user_texts


async def test_a_message_is_answered_and_recorded_end_to_end(rig: Rig) -> None:
    await rig.say("hello there")
    await rig.settle()

    assert rig.adapter.texts == ["reply: hello there"]
    session_id = await rig.session_id()
    active = await rig.store.load_active(session_id)
    assert [m.role for m in active] == ["user", "assistant"]
    assert active[0].text == "[Ann, 14:02 UTC] hello there"
    outbox = await rig.store.outbox_for_inbox(1)
    assert outbox is not None and outbox.status == "sent"


async def test_the_reply_quotes_the_message_it_answers(rig: Rig) -> None:
    await rig.say("hi", message_id="tg-77")
    await rig.settle()

    assert rig.adapter.sent[0].target.reply_to_message_id == "tg-77"


async def test_an_update_delivered_twice_is_answered_once(rig: Rig) -> None:
    await rig.gateway.intake(inbound("same update", message_id="dup-1"))
    await rig.gateway.intake(inbound("same update", message_id="dup-1"))
    await rig.settle()
    await rig.gateway.intake(inbound("same update", message_id="dup-1"))
    await rig.settle()

    assert rig.adapter.texts == ["reply: same update"]
    assert len(rig.responder.chat_bodies) == 1


async def test_ambient_group_messages_are_stored_without_a_reply(rig: Rig) -> None:
    for i in range(3):
        await rig.say(f"chatter {i}", chat_type="group", addressed=False, user_name=f"P{i}")
    await rig.settle()

    assert rig.adapter.sent == []
    assert rig.responder.chat_bodies == []
    active = await rig.store.load_active(await rig.session_id("test:group:chat-1"))
    assert [m.text for m in active] == [f"[P{i}, 14:02 UTC] chatter {i}" for i in range(3)]


async def test_an_addressed_group_message_sees_the_ambient_context_before_it(rig: Rig) -> None:
    await rig.say("the meeting is at 3", chat_type="group", addressed=False, user_name="Bob")
    await rig.settle()
    await rig.say("@bot when is the meeting?", chat_type="group")
    await rig.settle()

    texts = user_texts(rig.responder.chat_bodies[-1])
    assert texts[:2] == ["[Bob, 14:02 UTC] the meeting is at 3", "[Ann, 14:02 UTC] @bot when is the meeting?"]


async def test_five_messages_during_a_slow_turn_are_handed_to_one_follow_up_turn_in_order(rig: Rig) -> None:
    rig.fake.delay = 0.5
    await rig.say("first")
    await asyncio.sleep(0.2)  # the first turn is now waiting on the model
    for i in range(5):
        await rig.say(f"queued {i}")
    await rig.settle()

    assert len(rig.responder.chat_bodies) == 2
    follow_up = user_texts(rig.responder.chat_bodies[1])
    queued = [t for t in follow_up if "queued" in t]
    assert queued == [f"[Ann, 14:02 UTC] queued {i}" for i in range(5)]
    assert rig.adapter.texts == ["reply: first", "reply: queued 4"]
    # Every one of the five is recorded as answered by that one reply.
    replies = [await rig.store.outbox_for_inbox(i) for i in range(2, 7)]
    assert len({r.id for r in replies if r is not None}) == 1


async def test_interrupt_mode_cancels_the_running_turn_and_answers_everything_in_one_turn(
    store: Store,
) -> None:
    async with gateway_rig(store, sessions={"busy_mode": "interrupt"}) as rig:
        rig.fake.delay = 0.6
        await rig.say("long question")
        # The second message must arrive while the first turn waits on the model, however loaded the
        # machine is: wait for the model call rather than a fixed time.
        for _ in range(500):
            if rig.fake.message_requests:
                break
            await asyncio.sleep(0.01)
        await rig.say("actually, also this")
        await rig.settle()

        assert rig.adapter.texts == ["reply: actually, also this"]
        last = user_texts(rig.fake.message_requests[-1])
        assert last[-2:] == ["[Ann, 14:02 UTC] long question", "[Ann, 14:02 UTC] actually, also this"]
        for inbox_id in (1, 2):
            record = await rig.store.outbox_for_inbox(inbox_id)
            assert record is not None and record.text == "reply: actually, also this"


async def test_an_item_whose_reply_is_already_stored_is_not_answered_again(store: Store) -> None:
    # A crash after the turn stored its answer but before the outbox row: the next run sends that answer.
    async with gateway_rig(store, start=False) as rig:
        await rig.gateway.intake(inbound("question before the crash", message_id="c1"))
        claimed = await rig.store.inbox_claim(worker="dead", lease_seconds=0)
        info = await rig.directory.current("test:dm:chat-1", parse_item(claimed[0]))
        await rig.store.append_message(
            info.id, ChatMessage.user("[Ann, 14:02 UTC] question before the crash", platform_message_id="c1")
        )
        await rig.store.append_message(info.id, ChatMessage.assistant("the answer made before the crash"))
        await rig.delivery.start()
        await rig.gateway.start()
        await rig.settle()

        assert rig.adapter.texts == ["the answer made before the crash"]
        assert rig.responder.chat_bodies == []
        assert len(await rig.store.load_active(info.id)) == 2


async def test_undelivered_replies_are_sent_once_on_start(store: Store) -> None:
    async with gateway_rig(store) as rig:
        await rig.say("hello")
        await rig.settle()
    async with gateway_rig(store, start=False) as rig:
        session_id = await rig.session_id()
        await rig.store.outbox_put(
            session_id=session_id,
            target={"platform": "test", "chat_id": "chat-1"},
            text="late",
            inbox_ids=[],
            message_id=None,
        )
        await rig.delivery.start()
        await rig.gateway.start()
        await rig.settle()
        await rig.delivery.flush()
        assert rig.adapter.texts == ["late"]


async def test_an_overloaded_model_gets_one_sentence_and_an_answer_when_it_is_back(rig: Rig) -> None:
    rig.fake.fail_next(529, "overloaded_error", "Overloaded", times=1)
    await rig.say("are you there?")
    texts = await rig.adapter.wait_for(2, within=15)

    assert texts == ["The model is overloaded; I'll answer when it is back.", "reply: are you there?"]
    active = await rig.store.load_active(await rig.session_id())
    assert [m.role for m in active] == ["user", "assistant"]


async def test_a_rejected_api_key_becomes_one_short_sentence_not_a_traceback(rig: Rig) -> None:
    rig.fake.fail_next(401, "authentication_error", "invalid x-api-key")
    await rig.say("hello")
    await rig.settle()

    assert len(rig.adapter.texts) == 1
    assert "Traceback" not in rig.adapter.texts[0] and rig.adapter.texts[0].endswith(".")
    record = await rig.store.outbox_for_inbox(1)
    assert record is not None
    # The session still works afterwards.
    await rig.say("again")
    await rig.settle()
    assert rig.adapter.texts[-1] == "reply: again"


async def test_an_oversized_message_is_truncated_with_a_note_never_an_error(store: Store) -> None:
    async with gateway_rig(store, sessions={"max_inbound_chars": 1000}) as rig:
        await rig.say("x" * 5000)
        await rig.settle()

        assert len(rig.adapter.texts) == 2
        assert rig.adapter.texts[0].startswith("That's too long for me to read in one go")
        stored = (await rig.store.load_active(await rig.session_id()))[0].text
        assert stored.count("x") == 1000 and "truncated" in stored


async def test_nul_and_lone_surrogates_are_removed_before_storing(rig: Rig) -> None:
    await rig.say("a\x00b\ud800c")
    await rig.settle()

    stored = (await rig.store.load_active(await rig.session_id()))[0].text
    assert stored.endswith("abc")
    assert rig.adapter.texts == ["reply: abc"]


async def test_sessions_are_served_concurrently_but_each_one_turn_at_a_time(rig: Rig) -> None:
    rig.fake.delay = 0.3
    await rig.say("one", chat_id="a")
    await rig.say("two", chat_id="b")
    await rig.settle()

    assert sorted(rig.adapter.texts) == ["reply: one", "reply: two"]


async def test_a_custom_reply_is_delivered_verbatim(rig: Rig) -> None:
    rig.fake.script(text_reply("exactly this"))
    await rig.say("hi")
    await rig.settle()
    assert rig.adapter.texts == ["exactly this"]


async def test_an_item_held_by_a_dead_worker_is_served_once_its_lease_runs_out(store: Store) -> None:
    # Another worker claimed the message and died; nothing new arrives in that chat.
    async with gateway_rig(store, start=False, lease_seconds=2.0) as rig:
        await rig.gateway.intake(inbound("anyone there?", message_id="orphan-1"))
        [claimed] = await rig.store.inbox_claim(worker="dead", lease_seconds=1.0)
        await rig.delivery.start()
        await rig.gateway.start()
        assert rig.adapter.texts == []  # still leased to the dead worker at start

        for _ in range(60):
            if rig.adapter.texts:
                break
            await asyncio.sleep(0.1)
        await rig.settle()
        assert rig.adapter.texts == ["reply: anyone there?"]
        assert claimed.platform_message_id == "orphan-1"
