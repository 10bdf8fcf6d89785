"""Edited platform messages: the stored text follows the edit, nothing is answered twice."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from agent.types import SearchFilters
from tests.gateway.conftest import Rig, inbound


async def test_an_edit_updates_the_stored_text_and_keeps_its_place(rig: Rig) -> None:
    original = await rig.say("the meeting is at 3", message_id="e1")
    await rig.settle()
    edit = replace(
        original, text="the meeting is at 4", edited=True, timestamp=original.timestamp + timedelta(1)
    )
    await rig.gateway.intake(edit)
    await rig.settle()

    active = await rig.store.load_active(await rig.session_id())
    assert [m.role for m in active] == ["user", "assistant"]
    assert "the meeting is at 4" in active[0].text
    assert len(rig.responder.chat_bodies) == 1  # the edit is not answered again
    hits = await rig.store.search("4", _session_filter(await rig.session_id()))
    assert [h.message_id for h in hits] == [active[0].id]


async def test_two_edits_of_one_message_are_both_applied(rig: Rig) -> None:
    original = await rig.say("draft one", message_id="e2", chat_type="group", addressed=False)
    for n, text in enumerate(["draft two", "draft three"], start=1):
        edit = replace(original, text=text, edited=True, timestamp=original.timestamp + timedelta(minutes=n))
        await rig.gateway.intake(edit)
    await rig.settle()

    active = await rig.store.load_active(await rig.session_id("test:group:chat-1"))
    assert len(active) == 1 and "draft three" in active[0].text


async def test_an_edit_of_a_message_never_stored_is_taken_as_new(rig: Rig) -> None:
    msg = inbound("hello from before", message_id="unknown-1")
    await rig.gateway.intake(replace(msg, edited=True, timestamp=datetime(2026, 11, 29, 15, tzinfo=UTC)))
    await rig.settle()

    assert rig.adapter.texts == ["reply: hello from before"]


async def test_an_edited_command_is_not_run_again(rig: Rig) -> None:
    first = await rig.say("hello", message_id="c0")
    await rig.settle()
    command = await rig.say("/new", message_id="c1")
    await rig.settle()
    await rig.say("hello again", message_id="c2")
    await rig.settle()
    session_after_new = await rig.session_id()
    sent_before = len(rig.adapter.sent)
    edit = replace(command, text="/new please", edited=True, timestamp=first.timestamp + timedelta(1))
    await rig.gateway.intake(edit)
    await rig.settle()

    assert await rig.session_id() == session_after_new
    assert len(rig.adapter.sent) == sent_before


def _session_filter(session_id: str) -> SearchFilters:
    return SearchFilters(session_id=session_id)
