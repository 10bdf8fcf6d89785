"""The window holds the reply too: a request whose input plus ``max_tokens`` does not fit is refused
by the API ("input length and `max_tokens` exceed context limit: X + Y > Z"). The turn copes by
asking for a shorter reply when there is room for a real one, and compacts only when there is not."""

from __future__ import annotations

from agent.settings import CompressionSettings, LLMSettings
from tests.agent.loop_support import MODEL, exchanges, make_session, rig
from tests.fakes.anthropic import FakeAnthropic

WINDOW = 12_000
LLM = LLMSettings(max_retries=0, max_output_tokens=4096)
# In-loop compaction only near the window: these turns are about the reply's share of it.
LATE = CompressionSettings(threshold=0.95)


def _fitting(fake: FakeAnthropic, body: dict[str, object]) -> bool:
    return fake.count_tokens(body) + int(body["max_tokens"]) <= WINDOW  # type: ignore[call-overload]


async def test_max_tokens_is_cut_to_the_room_the_window_leaves_without_compacting() -> None:
    async with rig(context_window=WINDOW, llm=LLM, compression=LATE) as r:
        await r.preload(exchanges(14, chars=1000))
        result = await r.turn("go on")

        assert result.final_text.startswith("ack:")
        assert result.compactions == []
        assert r.script.summary_bodies == []
        answered = r.script.chat_bodies[-1]
        assert _fitting(r.fake, answered) and 1024 <= answered["max_tokens"] < 4096
        assert r.fake.count_tokens(answered) > WINDOW - 4096  # the full 4096 would not have fit


async def test_a_window_smaller_than_we_thought_lowers_max_tokens_from_the_apis_own_numbers() -> None:
    # We believe the model has 200k tokens (a mistaken HYGIEIA_CONTEXT_WINDOW, say); the API has 12k.
    session = make_session(context_window=200_000)
    async with rig(llm=LLM, compression=LATE, session=session) as r:
        r.fake.windows = {MODEL: WINDOW}
        await r.preload(exchanges(14, chars=1000))
        result = await r.turn("go on")

        assert result.final_text.startswith("ack:")
        assert result.compactions == []  # nothing needed summarizing: only the reply was too long
        bodies = r.fake.message_requests
        assert bodies[0]["max_tokens"] == 4096 and not _fitting(r.fake, bodies[0])
        assert _fitting(r.fake, bodies[-1]) and bodies[-1]["max_tokens"] >= 1024
        # The real limit is remembered: the next turn asks for a reply that fits at once.
        calls = len(r.fake.message_requests)
        await r.turn("and then?")
        assert len(r.fake.message_requests) == calls + 1 and _fitting(r.fake, r.fake.message_requests[-1])


async def test_no_room_for_a_real_reply_compacts_and_then_answers() -> None:
    session = make_session(context_window=200_000)
    async with rig(llm=LLM, compression=LATE, session=session) as r:
        r.fake.windows = {MODEL: WINDOW}
        await r.preload(exchanges(19, chars=1000))  # leaves less than 1024 tokens for the reply
        result = await r.turn("go on")

        assert result.final_text.startswith("ack:")
        assert [c.trigger for c in result.compactions] == ["reactive"]
        assert _fitting(r.fake, r.fake.message_requests[-1])
        await r.assert_valid()
