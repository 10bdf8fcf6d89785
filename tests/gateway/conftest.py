"""Gateway test wiring: the real Gateway, AgentLoop, ContextCompressor and SQL store, with the real
anthropic SDK against the fake server, and a recording platform adapter."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from agent.engines.compressor.engine import ContextCompressor
from agent.llm import AnthropicProvider
from agent.loop import AgentLoop
from agent.memory_flush import FLUSH_SYSTEM
from agent.prompts import SUMMARIZER_SYSTEM
from agent.settings import LLMSettings
from agent.tools import default_registry
from agent.tools.mcp_servers import McpCatalog
from gateway.config import Settings
from gateway.errors import AdapterError
from gateway.outbound.delivery import Delivery
from gateway.platforms.base import InboundHandler, InboundMessage, OutboundTarget, PlatformAdapter
from gateway.runner import budget_for, build_gateway, context_window_for
from gateway.serving.dispatch import Gateway
from gateway.serving.retry import RetryPolicy
from gateway.serving.sessions import SessionDirectory
from gateway.serving.tool_view import ToolView
from gateway.store.repository import Store
from tests.fakes.anthropic import (
    Answer,
    FakeAnthropic,
    last_user_text,
    summary_text,
    text_reply,
)

# Not claude-sonnet-4-5: the SDK warns it is deprecated, and warnings are errors in tests.
MODEL = "claude-sonnet-4-6"


@dataclass
class Sent:
    target: OutboundTarget
    text: str


class RecordingAdapter(PlatformAdapter):
    """A platform that records what it is asked to send; ``fail_next`` makes sends raise AdapterError,
    ``refuse`` (text -> exception or None) makes chosen sends fail every time."""

    name = "test"
    text_limit = 4096

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.typing = 0
        self.fail_next = 0
        self.refuse: Callable[[str], Exception | None] = lambda text: None
        self.started = False
        self._changed = asyncio.Condition()

    async def start(self, handler: InboundHandler) -> None:
        self.started = True

    async def stop(self) -> None:
        self.started = False

    async def send(self, target: OutboundTarget, text: str) -> list[str]:
        if self.fail_next > 0:
            self.fail_next -= 1
            raise AdapterError("platform unavailable (test)")
        refused = self.refuse(text)
        if refused is not None:
            raise refused
        self.sent.append(Sent(target, text))
        async with self._changed:
            self._changed.notify_all()
        return [f"out-{len(self.sent)}"]

    async def send_typing(self, target: OutboundTarget) -> None:
        self.typing += 1

    @property
    def texts(self) -> list[str]:
        return [s.text for s in self.sent]

    async def wait_for(self, count: int, within: float = 10.0) -> list[str]:
        """Until at least ``count`` messages were sent; returns the texts."""

        async def enough() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self.sent) >= count)

        await asyncio.wait_for(enough(), within)
        return self.texts


@dataclass
class ChatResponder:
    """Fake-server responder: summaries get a structured summary, chats ``reply: <last user line>``."""

    chat_bodies: list[dict[str, Any]] = field(default_factory=list)
    summary_bodies: list[dict[str, Any]] = field(default_factory=list)
    flush_bodies: list[dict[str, Any]] = field(default_factory=list)
    """Memory-flush requests (agent.memory_flush): answered with no call, nothing to save."""
    chat_delay: float = 0.0
    override: Callable[[dict[str, Any]], Answer | None] | None = None

    async def __call__(self, body: dict[str, Any]) -> Answer:
        if is_summarizer_call(body):
            self.summary_bodies.append(body)
            return text_reply(summary_text(last_user_text(body)[-200:]))
        if is_flush_call(body):
            self.flush_bodies.append(body)
            return text_reply("nothing to save")
        self.chat_bodies.append(body)
        if self.chat_delay:
            await asyncio.sleep(self.chat_delay)
        if self.override is not None:
            answer = self.override(body)
            if answer is not None:
                return answer
        last = last_user_text(body).strip().splitlines()[-1] if last_user_text(body).strip() else ""
        return text_reply(f"reply: {last.split('] ', 1)[-1][:80]}")


def is_summarizer_call(body: dict[str, Any]) -> bool:
    """A call from the compressor (its own system prompt), not a chat turn.

    The fake's ``is_summary_request`` looks for "summarize" anywhere in the system prompt, which
    the default chat system prompt ("...may have been summarized...") also contains.
    """
    system = body.get("system") or []
    text = system if isinstance(system, str) else " ".join(str(b.get("text", "")) for b in system)
    return text.startswith(SUMMARIZER_SYSTEM[:60])


def is_flush_call(body: dict[str, Any]) -> bool:
    """The silent memory turn before a summary (its own system prompt), not a chat turn."""
    system = body.get("system") or []
    text = system if isinstance(system, str) else " ".join(str(b.get("text", "")) for b in system)
    return text.startswith(FLUSH_SYSTEM[:60])


def user_texts(body: dict[str, Any]) -> list[str]:
    """Every text block of every user message in a request, in order."""
    out: list[str] = []
    for message in body.get("messages", []):
        if message.get("role") != "user" or not isinstance(message.get("content"), list):
            continue
        out.extend(str(b.get("text", "")) for b in message["content"] if b.get("type") == "text")
    return out


def inbound(
    text: str,
    *,
    message_id: str | None = None,
    chat_id: str = "chat-1",
    user_id: str = "u1",
    user_name: str = "Ann",
    chat_type: str = "dm",
    addressed: bool = True,
    thread_id: str | None = None,
) -> InboundMessage:
    return InboundMessage(
        platform="test",
        chat_id=chat_id,
        user_id=user_id,
        text=text,
        platform_message_id=message_id,
        user_name=user_name,
        chat_type=chat_type,  # type: ignore[arg-type]
        addressed=addressed,
        thread_id=thread_id,
        timestamp=datetime(2026, 11, 29, 14, 2, tzinfo=UTC),
    )


@dataclass
class Rig:
    settings: Settings
    store: Store
    fake: FakeAnthropic
    responder: ChatResponder
    adapter: RecordingAdapter
    provider: AnthropicProvider
    engine: ContextCompressor
    agent: AgentLoop
    delivery: Delivery
    directory: SessionDirectory
    gateway: Gateway
    _ids: int = 0

    async def say(self, text: str, **kw: Any) -> InboundMessage:
        """Hand one message to the gateway's intake (with a fresh platform message id)."""
        self._ids += 1
        kw.setdefault("message_id", f"m{self._ids}")
        msg = inbound(text, **kw)
        await self.gateway.intake(msg)
        return msg

    async def settle(self, within: float = 20.0) -> None:
        """Until every session is served and every due reply is sent."""
        await asyncio.wait_for(self.gateway.wait_idle(), within)
        await self.delivery.flush()

    async def session_id(self, key: str = "test:dm:chat-1") -> str:
        info = await self.store.current_session(key)
        assert info is not None
        return info.id


def make_settings(**overrides: Any) -> Settings:
    base: dict[str, Any] = {"allow_all_users": True, "model": MODEL}
    base.update(overrides)
    return Settings(**base)


@asynccontextmanager
async def gateway_rig(
    store: Store,
    *,
    context_window: int = 200_000,
    settings: Settings | None = None,
    lease_seconds: float = 60.0,
    start: bool = True,
    tool_servers: McpCatalog | None = None,
    **setting_overrides: Any,
) -> AsyncIterator[Rig]:
    """A started Gateway over ``store`` answering through the fake Anthropic server (offering the
    tools of ``tool_servers`` too, when given)."""
    settings = settings or make_settings(context_window=context_window, **setting_overrides)
    responder = ChatResponder()
    async with FakeAnthropic(context_window=context_window, responder=responder) as fake:
        llm = LLMSettings(max_retries=0)
        provider = AnthropicProvider(api_key="test", base_url=fake.base_url, settings=llm)
        engine = ContextCompressor(settings.compression, provider, summary_model=settings.summary_model)
        tools = default_registry()
        if tool_servers is not None:
            tools.add_source(tool_servers)
        agent = AgentLoop(provider, store, engine, llm=llm, caching=settings.prompt_caching, tools=tools)
        adapter = RecordingAdapter()
        delivery = Delivery(store, {adapter.name: adapter}, base_delay=0.01, poll_seconds=0.05)
        directory = SessionDirectory(
            store,
            settings.sessions,
            model=settings.model,
            context_window=lambda model: context_window_for(settings, model),
            budget=lambda model: budget_for(settings, model),
            overrides=settings.overrides,
        )
        gateway = build_gateway(
            settings=settings,
            store=store,
            agent=agent,
            engine=engine,
            delivery=delivery,
            directory=directory,
            tools=tools,
            lease_seconds=lease_seconds,
            retry=RetryPolicy.of((0.2, 0.4, 0.8)),
            tool_view=ToolView(tools, tool_servers),
        )
        rig = Rig(
            settings, store, fake, responder, adapter, provider, engine, agent, delivery, directory, gateway
        )
        await adapter.start(gateway.intake)
        if start:
            await delivery.start()
            await gateway.start()
        try:
            yield rig
        finally:
            await gateway.stop(1.0)
            await delivery.stop()
            await provider.aclose()


@pytest.fixture
async def rig(store: Store) -> AsyncIterator[Rig]:
    async with gateway_rig(store) as r:
        yield r
