"""Shared wiring for the loop tests: the real SDK (AnthropicProvider) against the fake server,
the InMemoryStore and the real ContextCompressor."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from agent.context_engine import ContextEngine
from agent.engines.compressor.engine import ContextCompressor
from agent.llm import AnthropicProvider
from agent.loop import AgentLoop
from agent.loop_turn import TurnResult
from agent.provider import LLMProvider
from agent.settings import CompressionSettings, LLMSettings, PromptCachingSettings
from agent.tools import ToolRegistry, default_registry
from agent.transcript import validate_messages
from agent.types import AgentSession, ChatMessage
from tests.fakes.anthropic import (
    Answer,
    FakeAnthropic,
    is_summary_request,
    last_user_text,
    summary_text,
    text_reply,
)
from tests.fakes.memory_store import InMemoryStore

# Not claude-sonnet-4-5: the SDK warns it is deprecated (end of life 2026-11-30), and warnings are errors.
MODEL = "claude-sonnet-4-6"
SUMMARY_MODEL = "claude-haiku-4-5"


def make_session(
    session_id: str = "s1", *, context_window: int = 200_000, key: str = "test:chat-1"
) -> AgentSession:
    return AgentSession(
        id=session_id,
        system_prompt="You are a test assistant. Answer briefly.",
        model=MODEL,
        context_window=context_window,
        key=key,
        platform="test",
    )


@dataclass
class ChatScript:
    """Scripted answers for chat calls only; summary calls always get a structured summary,
    so a compaction in the middle of a turn does not eat the script."""

    replies: deque[Answer | Callable[[dict[str, Any]], Answer]] = field(default_factory=deque)
    chat_bodies: list[dict[str, Any]] = field(default_factory=list)
    summary_bodies: list[dict[str, Any]] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    def add(self, *answers: Answer | Callable[[dict[str, Any]], Answer]) -> None:
        self.replies.extend(answers)

    def __call__(self, body: dict[str, Any]) -> Answer:
        if is_summary_request(body):
            self.summary_bodies.append(body)
            self.log.append("summary")
            return text_reply(summary_text(last_user_text(body)[-200:]))
        self.chat_bodies.append(body)
        self.log.append("chat")
        if not self.replies:
            return text_reply(f"ack: {last_user_text(body)[:40]}")
        answer = self.replies.popleft()
        return answer(body) if callable(answer) else answer


def exchanges(count: int, *, chars: int = 200, start: int = 0) -> list[ChatMessage]:
    """``count`` user/assistant exchanges of about ``chars`` characters each side."""
    filler = "lorem ipsum dolor sit amet " * (chars // 27 + 1)
    out: list[ChatMessage] = []
    for i in range(start, start + count):
        out.append(ChatMessage.user(f"question {i}: {filler[:chars]}"))
        out.append(ChatMessage.assistant(f"answer {i}: {filler[:chars]}"))
    return out


@dataclass
class Rig:
    fake: FakeAnthropic
    store: InMemoryStore
    loop: AgentLoop
    script: ChatScript
    session: AgentSession

    async def stored(self) -> list[ChatMessage]:
        return await self.store.load_active(self.session.id)

    async def preload(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        return [await self.store.append_message(self.session.id, m) for m in messages]

    async def turn(self, text: str) -> TurnResult:
        return await self.loop.run_turn(self.session, message=ChatMessage.user(text))

    async def assert_valid(self) -> None:
        problems = validate_messages(await self.stored())
        assert problems == [], problems


@asynccontextmanager
async def rig(
    *,
    context_window: int = 200_000,
    llm: LLMSettings | None = None,
    compression: CompressionSettings | None = None,
    tools: ToolRegistry | None = None,
    session: AgentSession | None = None,
    store: InMemoryStore | None = None,
    engine: Callable[[LLMProvider], ContextEngine] | None = None,
) -> AsyncIterator[Rig]:
    session = session or make_session(context_window=context_window)
    script = ChatScript()
    llm = llm or LLMSettings(max_retries=0)
    async with FakeAnthropic(context_window=context_window, responder=script) as fake:
        provider = AnthropicProvider(api_key="test", base_url=fake.base_url, settings=llm)
        try:
            store = store if store is not None else InMemoryStore()
            built = (
                engine(provider)
                if engine is not None
                else ContextCompressor(
                    compression or CompressionSettings(), provider, summary_model=SUMMARY_MODEL
                )
            )
            loop = AgentLoop(
                provider,
                store,
                built,
                llm=llm,
                caching=PromptCachingSettings(),
                tools=tools if tools is not None else default_registry(),
            )
            yield Rig(fake, store, loop, script, session)
        finally:
            await provider.aclose()
