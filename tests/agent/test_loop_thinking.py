"""Thinking blocks through the tool loop, compaction and streaming, against the project's fake
(which signs them and refuses any that comes back changed, unsigned, or to another model)."""

from __future__ import annotations

import json
from typing import Any

from agent.compaction import compact
from agent.loop_request import estimate_request_tokens
from agent.settings import CompressionSettings
from agent.types import AgentSession, ChatMessage, ContentBlock, ContextState
from tests.agent.loop_support import exchanges, rig
from tests.fakes.anthropic import Reply, text_reply
from tests.fakes.anthropic_thinking import sign

MODEL = "claude-sonnet-5-5"


def session(model: str = MODEL, budget: int = 200_000) -> AgentSession:
    return AgentSession(
        id="s1",
        system_prompt="You are a test assistant. Answer briefly.",
        model=model,
        context_window=1_000_000,
        key="test:chat-1",
        budget_tokens=budget,
    )


def thinking_tool_round(note: str, query: str, tool_id: str) -> Reply:
    return Reply(
        [
            {"type": "thinking", "thinking": note},
            {"type": "tool_use", "id": tool_id, "name": "session_search", "input": {"query": query}},
        ],
        "tool_use",
    )


def assistant_thinking(body: dict[str, Any]) -> list[ContentBlock]:
    return [
        block
        for message in body["messages"]
        if message["role"] == "assistant"
        for block in message["content"]
        if block.get("type") == "thinking"
    ]


NOTES = ("First I look for the date.", "Now the venue; still searching.", "One more: the names.")


async def test_thinking_blocks_survive_a_three_round_tool_loop_byte_for_byte() -> None:
    async with rig(session=session()) as r:
        r.script.add(
            *(thinking_tool_round(note, f"q{i}", f"toolu_{i:024d}") for i, note in enumerate(NOTES)),
            text_reply("found it all"),
        )
        result = await r.turn("when and where was the party?")
        assert result.final_text == "found it all"
        signed = [sign({"type": "thinking", "thinking": note}, MODEL) for note in NOTES]
        bodies = r.script.chat_bodies
        assert len(bodies) == 4
        for calls_before, body in enumerate(bodies):
            sent = assistant_thinking(body)
            assert [json.dumps(b, sort_keys=True) for b in sent] == [
                json.dumps(b, sort_keys=True) for b in signed[:calls_before]
            ]
        stored = [b for m in await r.stored() for b in m.content if b.get("type") == "thinking"]
        assert stored == signed
        assert r.fake.counts["errors"] == 0


async def test_thinking_never_reaches_the_summary_model() -> None:
    settings = CompressionSettings(protect_first_n=0, protect_last_n=4)
    async with rig(session=session(budget=4_000), compression=settings) as r:
        r.script.add(thinking_tool_round(NOTES[0], "q", "toolu_1"), text_reply("done"))
        await r.turn("look it up")
        await r.preload(exchanges(20))
        await compact(r.loop._engine, r.store, r.session, trigger="manual")
        assert r.script.summary_bodies, "the compaction asked the summary model"
        for body in r.script.summary_bodies:
            dumped = json.dumps(body)
            assert '"thinking"' not in dumped and NOTES[0] not in dumped
            assert "signature" not in dumped


async def test_earlier_turns_thinking_is_not_counted_against_the_window() -> None:
    thought = {"type": "thinking", "thinking": "pondering " * 20_000, "signature": "x"}
    plain = [ChatMessage.user("hi"), ChatMessage.assistant("hello"), ChatMessage.user("and now?")]
    thinking = [
        ChatMessage.user("hi"),
        ChatMessage(role="assistant", content=[thought, {"type": "text", "text": "hello"}]),
        ChatMessage.user("and now?"),
    ]
    s = session()
    with_thought = estimate_request_tokens(s, thinking, [], ContextState())
    assert with_thought == estimate_request_tokens(s, plain, [], ContextState())
    async with rig(session=s) as r:
        body = {"model": MODEL, "messages": [m.to_wire() for m in thinking]}
        without = {"model": MODEL, "messages": [m.to_wire() for m in plain]}
        assert r.fake.count_tokens(body) == r.fake.count_tokens(without)  # the API agrees


class Recorder:
    """A TurnListener that keeps what the user would see of each call."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.tools: list[str] = []

    def call_started(self) -> None:
        self.shown.append("")

    def text(self, delta: str) -> None:
        self.shown[-1] += delta

    def tool_started(self, name: str) -> None:
        self.tools.append(name)


async def test_a_streamed_turn_whose_text_between_tools_arrives_as_thinking_still_shows_it() -> None:
    async with rig(session=session()) as r:
        r.script.add(
            thinking_tool_round("Let me look that up for you.", "party", "toolu_9"), text_reply("Saturday.")
        )
        listener = Recorder()
        await r.loop.run_turn(r.session, message=ChatMessage.user("when is the party?"), listener=listener)
        assert listener.tools == ["session_search"]
        assert listener.shown == ["Let me look that up for you.", "Saturday."]
        assert r.script.chat_bodies[0]["thinking"] == {"type": "adaptive", "display": "summarized"}
