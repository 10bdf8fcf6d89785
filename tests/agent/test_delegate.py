"""``delegate``: a sub-agent with a fresh context, through the real loop, the real store and the
real SDK against the fake Anthropic server. Requests of the sub-agent are told apart from the
chat's by their system prompt."""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent.engines.compressor.engine import ContextCompressor
from agent.llm import AnthropicProvider
from agent.loop import AgentLoop
from agent.prompts import SUBAGENT_SYSTEM
from agent.settings import CompressionSettings, LLMSettings, PromptCachingSettings
from agent.tools import FunctionTool, Tool, ToolContext, default_registry
from agent.tools.delegate import DelegateTool, DelegationLimits, SubAgentParts
from agent.tools.scope import ToolScope
from agent.transcript import validate_messages
from agent.types import AgentSession, ChatMessage, SearchFilters
from gateway.store.db import Database
from gateway.store.repository import Store
from tests.agent.loop_support import MODEL, SUMMARY_MODEL
from tests.fakes.anthropic import Answer, FakeAnthropic, text_reply, tool_use_reply


@pytest.fixture
def sql_store(database: Database) -> Store:
    """The real store (this folder's ``store`` fixture is the in-memory one)."""
    return Store(database)


RARE = "zanzibarite"
"""A word only the sub-agent ever reads (inside the big file)."""
ANSWER = "The file names the launch code 7731."
SUB_MARK = SUBAGENT_SYSTEM[:40]


async def read_file(ctx: ToolContext, tool_input: dict[str, Any]) -> str:
    """An expensive read: ~12 KB of text with the rare word in the middle."""
    lines = [f"{n:4d} lorem ipsum dolor sit amet consectetur adipiscing elit sed do" for n in range(200)]
    lines[100] = f" 100 the launch code is 7731 ({RARE})"
    return "\n".join(lines)


Step = Answer | Callable[[dict[str, Any]], Any]


@dataclass
class Script:
    """Scripted answers for the chat and for its sub-agent; every request body kept."""

    chat: deque[Step] = field(default_factory=deque)
    sub: deque[Step] = field(default_factory=deque)
    sub_default: Step | None = None
    chat_bodies: list[dict[str, Any]] = field(default_factory=list)
    sub_bodies: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, body: dict[str, Any]) -> Answer:
        system = json.dumps(body.get("system", ""))
        is_sub = SUB_MARK in system
        (self.sub_bodies if is_sub else self.chat_bodies).append(body)
        queue = self.sub if is_sub else self.chat
        step = queue.popleft() if queue else (self.sub_default if is_sub else None) or text_reply("ok")
        if callable(step):
            result = step(body)
            return await result if asyncio.iscoroutine(result) else result  # type: ignore[no-any-return]
        return step


@dataclass
class Wired:
    fake: FakeAnthropic
    loop: AgentLoop
    session: AgentSession
    script: Script
    store: Store

    async def turn(self, text: str) -> None:
        await self.loop.run_turn(self.session, message=ChatMessage.user(text))

    async def child(self) -> str:
        children = await self.store.delegations(self.session.id)
        assert len(children) == 1
        return children[0]


@asynccontextmanager
async def wired(store: Store, limits: DelegationLimits | None = None) -> AsyncIterator[Wired]:
    script = Script()
    llm = LLMSettings(max_retries=0)
    async with FakeAnthropic(responder=script) as fake:
        provider = AnthropicProvider(api_key="test", base_url=fake.base_url, settings=llm)
        try:
            engine = ContextCompressor(CompressionSettings(), provider, summary_model=SUMMARY_MODEL)
            tools = default_registry()
            tools.register(
                FunctionTool(
                    "read_file",
                    "Read a file.",
                    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
                    read_file,
                )
            )
            caching = PromptCachingSettings()
            tools.register(DelegateTool(SubAgentParts(provider, engine, tools, llm, caching), limits))
            loop = AgentLoop(provider, store, engine, llm=llm, caching=caching, tools=tools)
            info = await store.get_or_create_session(
                "test:chat-1", platform="test", chat_id="chat-1", system_prompt="You help.", model=MODEL
            )
            session = AgentSession(
                id=info.id,
                system_prompt=info.system_prompt,
                model=MODEL,
                context_window=200_000,
                key=info.key,
                platform="test",
            )
            yield Wired(fake, loop, session, script, store)
        finally:
            await provider.aclose()


def delegated_read(w: Wired) -> None:
    """The chat delegates; the sub-agent reads the big file and answers."""
    w.script.chat.extend([tool_use_reply("delegate", {"task": "What launch code does /plan.txt name?"})])
    w.script.sub.extend([tool_use_reply("read_file", {"path": "/plan.txt"}), text_reply(ANSWER)])


def tool_results(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for message in body["messages"]:
        if isinstance(message["content"], list):
            out += [json.dumps(b["content"]) for b in message["content"] if b.get("type") == "tool_result"]
    return out


async def test_the_chat_context_grows_by_the_sub_agents_answer_only(sql_store: Store) -> None:
    async with wired(sql_store) as w:
        delegated_read(w)
        await w.turn("find the launch code")
        await w.turn("thanks")
    assert any(RARE in json.dumps(b["messages"]) for b in w.script.sub_bodies)  # the sub-agent read it
    last = w.script.chat_bodies[-1]
    assert RARE not in json.dumps(last)
    (result,) = tool_results(last)
    assert ANSWER in result and "[sub-agent:" in result and "read_file x1" in result
    assert len(result) < 600


async def test_the_sub_agent_is_not_offered_delegate(sql_store: Store) -> None:
    async with wired(sql_store) as w:
        delegated_read(w)
        await w.turn("find the launch code")
    chat_tools = {t["name"] for t in w.script.chat_bodies[0]["tools"]}
    sub_tools = {t["name"] for t in w.script.sub_bodies[0]["tools"]}
    assert "delegate" in chat_tools
    assert "delegate" not in sub_tools
    assert sub_tools == chat_tools - {"delegate"}


@dataclass(frozen=True)
class ChatTools:
    """Tools offered per chat, as an MCP server's are (a source beside the registered tools)."""

    tools: tuple[Tool, ...]

    def tools_for(self, scope: ToolScope) -> Sequence[Tool]:
        return self.tools


async def lookup(ctx: ToolContext, tool_input: dict[str, Any]) -> str:
    return "page 12"


async def test_the_sub_agent_is_offered_the_per_chat_tools_its_chat_was_offered(sql_store: Store) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    async with wired(sql_store) as w:
        w.loop.tools.add_source(
            ChatTools((FunctionTool("mcp_docs_lookup", "Look a page up.", schema, lookup),))
        )
        delegated_read(w)
        await w.turn("find the launch code")
    chat_tools = {t["name"] for t in w.script.chat_bodies[0]["tools"]}
    sub_tools = {t["name"] for t in w.script.sub_bodies[0]["tools"]}
    assert "mcp_docs_lookup" in chat_tools
    assert sub_tools == chat_tools - {"delegate"}


async def test_the_sub_agents_transcript_is_an_archived_session_linked_to_the_chat(sql_store: Store) -> None:
    async with wired(sql_store) as w:
        delegated_read(w)
        await w.turn("find the launch code")
        child = await w.child()
    info = await sql_store.get_session(child)
    assert info.parent_session_id == w.session.id
    assert info.ended and info.end_reason == "delegation done"
    assert await sql_store.load_active(child) == []
    assert (await sql_store.current_session("test:chat-1")) is not None
    assert (await sql_store.current_session("test:chat-1")).id == w.session.id  # type: ignore[union-attr]


async def test_admin_search_finds_a_word_only_the_sub_agent_read(sql_store: Store) -> None:
    async with wired(sql_store) as w:
        delegated_read(w)
        await w.turn("find the launch code")
        child = await w.child()
    hits = await sql_store.search(RARE, SearchFilters())
    assert [h.session_id for h in hits] == [child]


async def test_the_chats_session_search_finds_a_word_only_the_sub_agent_read(sql_store: Store) -> None:
    async with wired(sql_store) as w:
        delegated_read(w)
        await w.turn("find the launch code")
        w.script.chat.append(tool_use_reply("session_search", {"query": RARE}))
        await w.turn("where did you see that word?")
    (found,) = [r for r in tool_results(w.script.chat_bodies[-1]) if "matches for" in r]
    assert RARE in found and "1 matches" in found and "a sub-agent's run (delegate)" in found


async def test_another_chats_session_search_does_not_find_the_sub_agents_words(sql_store: Store) -> None:
    async with wired(sql_store) as w:
        delegated_read(w)
        await w.turn("find the launch code")
        other = await sql_store.get_or_create_session(
            "test:chat-2", platform="test", chat_id="chat-2", system_prompt="You help.", model=MODEL
        )
    hits = await sql_store.search(RARE, SearchFilters(session_id=other.id, with_delegations=True))
    assert hits == []


async def test_the_sub_agents_usage_is_counted_to_the_chat(sql_store: Store) -> None:
    async with wired(sql_store) as w:
        delegated_read(w)
        await w.turn("find the launch code")
        child = await w.child()
    chat = await sql_store.usage_summary(w.session.id)
    assert chat.calls == len(w.script.chat_bodies) + len(w.script.sub_bodies) == 4
    assert (await sql_store.usage_summary(child)).calls == 0


async def test_stop_cancels_the_sub_agent_and_the_turn_ends_cleanly(sql_store: Store) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def hang(body: dict[str, Any]) -> Answer:
        started.set()
        await release.wait()
        return text_reply("too late")

    async with wired(sql_store) as w:
        delegated_read(w)
        w.script.sub = deque([tool_use_reply("read_file", {"path": "/plan.txt"}), hang])
        task = asyncio.create_task(w.turn("find the launch code"))
        try:
            await asyncio.wait_for(started.wait(), 10)
            begun = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert time.monotonic() - begun < 5
        finally:
            release.set()
        child = await w.child()
    info = await sql_store.get_session(child)
    assert info.ended and info.end_reason == "delegation cancelled"
    stored = await sql_store.load_active(w.session.id)
    assert validate_messages(stored) == []
    assert "cancelled" in json.dumps(stored[-1].content)
    assert len(w.script.sub_bodies) == 2  # nothing after the call in flight


async def test_max_turns_stops_the_sub_agent_with_a_note(sql_store: Store) -> None:
    async with wired(sql_store, DelegationLimits(max_turns=2)) as w:
        w.script.chat.append(tool_use_reply("delegate", {"task": "read everything"}))
        w.script.sub_default = lambda body: tool_use_reply(
            "read_file", {"path": "/x"}, text=f"reading part {len(w.script.sub_bodies)}"
        )
        await w.turn("go")
    assert len(w.script.sub_bodies) == 2
    (result,) = tool_results(w.script.chat_bodies[-1])
    assert "stopped at max_turns (2)" in result and "reading part 2" in result


async def test_max_tokens_stops_the_sub_agent_with_a_note(sql_store: Store) -> None:
    async with wired(sql_store, DelegationLimits(max_tokens=5_000)) as w:
        w.script.chat.append(tool_use_reply("delegate", {"task": "read everything"}))
        w.script.sub_default = lambda body: tool_use_reply("read_file", {"path": "/x"}, text="reading")
        await w.turn("go")
    # each read adds ~3,000 tokens: the budget is spent after two calls, never a third
    assert len(w.script.sub_bodies) == 2
    (result,) = tool_results(w.script.chat_bodies[-1])
    assert "stopped at max_tokens (5000)" in result


async def test_the_timeout_stops_the_sub_agent_and_the_chat_turn_goes_on(sql_store: Store) -> None:
    release = asyncio.Event()

    async def hang(body: dict[str, Any]) -> Answer:
        await release.wait()
        return text_reply("too late")

    async with wired(sql_store, DelegationLimits(timeout_seconds=0.5)) as w:
        w.script.chat.extend(
            [tool_use_reply("delegate", {"task": "slow"}), text_reply("sorry, it timed out")]
        )
        w.script.sub.append(hang)
        begun = time.monotonic()
        try:
            await w.turn("go")
        finally:
            release.set()
        elapsed = time.monotonic() - begun
        child = await w.child()
    assert elapsed < 5
    (result,) = tool_results(w.script.chat_bodies[-1])
    assert "stopped at the timeout (0.5 s)" in result
    assert (await sql_store.get_session(child)).end_reason == "delegation timeout"
    assert validate_messages(await sql_store.load_active(w.session.id)) == []
