"""Ambient capture in batches: group messages not addressed to the bot are stored together.

A burst of ambient messages is stored in a few transactions (not two per message), in the
order received, each inbox item done with its message; an addressed message still sees every
ambient message before it; re-serving a batch (after a crash) stores nothing twice.
"""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from gateway.store.models import inbox
from tests.gateway.conftest import Rig, inbound, user_texts

GROUP = "test:group:chat-1"


async def test_a_burst_of_ambient_messages_is_stored_in_a_few_transactions(rig: Rig) -> None:
    commits = 0

    def on_commit(_conn: object) -> None:
        nonlocal commits
        commits += 1

    rig.store.db.listen("commit", on_commit)
    try:
        await asyncio.gather(
            *(
                rig.say(f"chatter {i}", chat_type="group", addressed=False, user_name=f"P{i}")
                for i in range(40)
            )
        )
        await rig.settle()
    finally:
        rig.store.db.unlisten("commit", on_commit)

    active = await rig.store.load_active(await rig.session_id(GROUP))
    assert [m.text for m in active] == [f"[P{i}, 14:02 UTC] chatter {i}" for i in range(40)]
    # Intake (group commit), session, claim, capture, touch, plus delivery polls: not 120 as before.
    assert commits <= 25, f"40 ambient messages took {commits} transactions"
    async with rig.store.db.transaction(write=False) as s:
        rows = (await s.execute(select(inbox.c.status, inbox.c.message_id).order_by(inbox.c.id))).all()
    assert [r.status for r in rows] == ["done"] * 40
    assert [r.message_id for r in rows] == [m.id for m in active]
    assert rig.adapter.sent == []


async def test_an_addressed_message_among_ambient_ones_keeps_the_order(rig: Rig) -> None:
    for text in ("lunch at noon", "or at one?"):
        await rig.say(text, chat_type="group", addressed=False, user_name="Bob")
    await rig.say("@bot which one?", chat_type="group")
    await rig.say("noon it is", chat_type="group", addressed=False, user_name="Bob")
    await rig.settle()

    assert user_texts(rig.responder.chat_bodies[0])[:3] == [
        "[Bob, 14:02 UTC] lunch at noon",
        "[Bob, 14:02 UTC] or at one?",
        "[Ann, 14:02 UTC] @bot which one?",
    ]
    active = await rig.store.load_active(await rig.session_id(GROUP))
    texts = [m.text for m in active]
    assert texts.index("[Bob, 14:02 UTC] noon it is") > texts.index("[Ann, 14:02 UTC] @bot which one?")
    assert len(texts) == 5  # three ambient, the question, the answer


async def test_ambient_message_then_its_edit_in_one_batch(rig: Rig) -> None:
    from dataclasses import replace
    from datetime import timedelta

    original = inbound("see you at 3", message_id="e1", chat_type="group", addressed=False)
    edit = replace(original, text="see you at 4", edited=True, timestamp=original.timestamp + timedelta(1))
    await asyncio.gather(rig.gateway.intake(original), rig.gateway.intake(edit))
    await rig.settle()

    active = await rig.store.load_active(await rig.session_id(GROUP))
    assert len(active) == 1 and "see you at 4" in active[0].text
