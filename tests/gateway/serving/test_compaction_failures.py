"""A compaction the store refuses is a failed compaction, whatever triggered it: a strike for the
summarizer's cooldown, and the turn goes on with the conversation as it stands."""

from __future__ import annotations

import inspect
from typing import Any

from agent.compaction import compact
from agent.types import ChatMessage
from gateway.store.repository import Store
from tests.fakes.anthropic import Answer
from tests.gateway.conftest import Rig, gateway_rig, is_summarizer_call

LONG_PASTES = {"max_inbound_chars": 120_000}
DOCUMENT = "please read this document:\n" + ("lorem ipsum dolor sit amet, consectetur " * 2600)[:100_000]


async def _restore_while_summarizing(rig: Rig, session_id: str) -> list[dict[str, Any]]:
    """The next summarizer call first undoes the latest compaction (an admin acting meanwhile):
    the plan it produces names a summary that is no longer active, and the store refuses it.
    Returns the summarizer requests seen from now on."""
    respond = rig.fake.responder
    assert respond is not None
    seen: list[dict[str, Any]] = []
    restored = False

    async def answer(body: dict[str, Any]) -> Answer:
        nonlocal restored
        if is_summarizer_call(body):
            seen.append(body)
            if not restored:
                restored = True
                await rig.store.restore_latest_compaction(session_id)
        result = respond(body)
        return await result if inspect.isawaitable(result) else result

    rig.fake.responder = answer
    return seen


async def test_a_store_error_in_an_in_loop_compaction_is_a_strike_and_the_turn_goes_on(store: Store) -> None:
    async with gateway_rig(store, context_window=50_000, sessions=LONG_PASTES) as rig:
        await rig.say("hello")
        await rig.settle()
        session_id = await rig.session_id()
        for i in range(80):
            text = f"{i}: " + "the quick brown fox jumps over the lazy dog " * 9
            await rig.store.append_message(
                session_id, ChatMessage.user(text) if i % 2 == 0 else ChatMessage.assistant(text)
            )
        info = await rig.store.get_session(session_id)
        first = await compact(rig.engine, rig.store, rig.directory.agent_session(info), trigger="manual")
        assert first.record is not None
        summaries = await _restore_while_summarizing(rig, session_id)

        await rig.say(DOCUMENT)
        await rig.settle()

        # One attempt, refused by the store: a strike, not an aborted turn retried later.
        assert len(summaries) == 1
        state = await rig.store.load_context_state(session_id)
        assert state.consecutive_failures == 1 and state.cooldown_until is not None
        compactions = await rig.store.list_compactions(session_id)
        assert [c.trigger for c in compactions] == ["manual"]  # restored; no in_loop one
        assert compactions[0].restored_at is not None
        # The document still fit (55% of the window): it was answered, once, and nothing else failed.
        replies = [t for t in rig.adapter.texts if t.startswith("reply: ")]
        assert rig.adapter.texts == ["reply: hello", replies[-1]] and replies[-1].startswith("reply: lorem")
