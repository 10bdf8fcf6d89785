"""The loop's token estimate against what the API counts: it must never run ahead of reality.

The fake server reports realistic usage: message characters / 4, the tool definitions, and the
few hundred tokens of tool-use preamble the API adds to any request that offers tools. Three
small turns teach the calibration little (the fixed overhead dwarfs the messages); a pasted
document must then be estimated at its real size, not at several times it.
"""

from __future__ import annotations

from agent.loop_request import estimate_request_tokens
from agent.loop_turn import TurnResult
from agent.types import ChatMessage
from tests.agent.loop_support import Rig, rig

DOCUMENT = (
    "please read this document:\n" + ("lorem ipsum dolor sit amet, consectetur adipiscing " * 2000)[:100_000]
)


async def _three_small_turns_then_the_document(r: Rig) -> TurnResult:
    for text in ("hello", "what can you do?", "thanks, one moment"):
        await r.turn(text)
    return await r.turn(DOCUMENT)


async def test_a_pasted_document_at_15_percent_of_the_window_is_not_compacted() -> None:
    async with rig(context_window=200_000) as r:
        result = await _three_small_turns_then_the_document(r)

        real = r.fake.count_tokens(r.script.chat_bodies[-1])
        assert 0.12 * 200_000 <= real <= 0.18 * 200_000
        assert result.compactions == [] and r.script.summary_bodies == []


async def test_the_same_document_at_55_percent_of_the_window_is_compacted_in_the_loop() -> None:
    async with rig(context_window=50_000) as r:
        await r.turn("hello")
        size = r.fake.count_tokens(r.script.chat_bodies[-1])
        assert size < 0.05 * 50_000
        result = await _three_small_turns_then_the_document(r)

        assert [c.trigger for c in result.compactions] == ["in_loop"]
        assert 0.50 * 50_000 <= result.compactions[0].tokens_before <= 0.60 * 50_000


async def test_the_estimate_of_the_document_call_is_within_ten_percent_of_the_real_count() -> None:
    async with rig(context_window=200_000) as r:
        for text in ("hello", "what can you do?", "thanks, one moment"):
            await r.turn(text)
        await r.store.append_message(r.session.id, ChatMessage.user(DOCUMENT))
        view = await r.stored()
        state = await r.store.load_context_state(r.session.id)
        estimate = estimate_request_tokens(r.session, view, r.loop.tools.definitions(), state)

        await r.loop.run_turn(r.session)

        real = r.fake.count_tokens(r.script.chat_bodies[-1])
        assert 0.9 * real <= estimate <= 1.1 * real
