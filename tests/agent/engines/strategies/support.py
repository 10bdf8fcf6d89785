"""Wiring for the server-side strategy tests: the real SDK against the fake server, the
InMemoryStore, and the loop with the default engine (the cost-ordered pipeline) whose
strategies include the server-side ones as configured."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from agent.engines.compressor.pipeline import CostOrderedCompressor
from agent.llm import AnthropicProvider
from agent.loop import AgentLoop
from agent.loop_turn import TurnResult
from agent.settings import CompressionSettings, LLMSettings, PromptCachingSettings
from agent.tools import default_registry
from agent.transcript import validate_messages
from agent.types import AgentSession, ChatMessage, ContentBlock
from tests.agent.loop_support import SUMMARY_MODEL, ChatScript
from tests.fakes.anthropic import FakeAnthropic, RecordedRequest
from tests.fakes.memory_store import InMemoryStore

MODEL = "claude-sonnet-4-6"  # supports both compaction kinds


def session_for(model: str = MODEL, *, context_window: int = 200_000) -> AgentSession:
    return AgentSession(
        id="s1",
        system_prompt="You are a test assistant. Answer briefly.",
        model=model,
        context_window=context_window,
        key="test:chat-1",
        platform="test",
    )


def tool_round(i: int, *, chars: int) -> list[ChatMessage]:
    use: ContentBlock = {
        "type": "tool_use",
        "id": f"toolu_{i:04d}",
        "name": "memory",
        "input": {"command": "view"},
    }
    result: ContentBlock = {
        "type": "tool_result",
        "tool_use_id": f"toolu_{i:04d}",
        "content": f"r{i} " + "z" * chars,
    }
    return [ChatMessage(role="assistant", content=[use]), ChatMessage(role="user", content=[result])]


def tool_history(rounds: int, *, chars: int = 4000) -> list[ChatMessage]:
    """A question, ``rounds`` tool rounds with long results, and the answer."""
    out = [ChatMessage.user("look things up")]
    for i in range(rounds):
        out += tool_round(i, chars=chars)
    out.append(ChatMessage.assistant("found them"))
    return out


def chats(count: int, *, chars: int = 400) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for i in range(count):
        out += [
            ChatMessage.user(f"question {i}: " + "q" * chars),
            ChatMessage.assistant(f"answer {i}: " + "a" * chars),
        ]
    return out


@dataclass
class Rig:
    fake: FakeAnthropic
    store: InMemoryStore
    loop: AgentLoop
    engine: CostOrderedCompressor
    script: ChatScript
    session: AgentSession
    settings: CompressionSettings

    async def preload(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        return [await self.store.append_message(self.session.id, m) for m in messages]

    async def turn(self, text: str) -> TurnResult:
        return await self.loop.run_turn(self.session, message=ChatMessage.user(text))

    async def active(self) -> list[ChatMessage]:
        return await self.store.load_active(self.session.id)

    async def assert_valid(self) -> None:
        problems = validate_messages(await self.active())
        assert problems == [], problems

    def chat_requests(self) -> list[RecordedRequest]:
        """The /v1/messages requests that were chat calls (not ours or the API's summaries)."""
        return [
            r
            for r in self.fake.requests
            if r.path == "/v1/messages" and r.json is not None and r.json in self.script.chat_bodies
        ]

    def compaction_requests(self) -> list[dict[str, Any]]:
        return [body for body in self.fake.message_requests if "compaction" in body]


@asynccontextmanager
async def rig(
    settings: CompressionSettings | None = None,
    *,
    session: AgentSession | None = None,
    caching: bool = True,
    llm: LLMSettings | None = None,
) -> AsyncIterator[Rig]:
    settings = settings or CompressionSettings()
    session = session or session_for()
    script = ChatScript()
    llm = llm or LLMSettings(max_retries=0)
    async with FakeAnthropic(responder=script) as fake:
        provider = AnthropicProvider(api_key="test", base_url=fake.base_url, settings=llm)
        try:
            store = InMemoryStore()
            tools = default_registry()
            engine = CostOrderedCompressor(settings, provider, summary_model=SUMMARY_MODEL)
            loop = AgentLoop(
                provider,
                store,
                engine,
                llm=llm,
                caching=PromptCachingSettings(enabled=caching),
                tools=tools,
            )
            yield Rig(fake, store, loop, engine, script, session, settings)
        finally:
            await provider.aclose()
