"""Shared by the admin tests: the app in-process over httpx, and a session with history to show."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx

from agent.context_engine import ContextEngine
from agent.engines.compressor.engine import ContextCompressor
from agent.llm import AnthropicProvider
from agent.settings import CompressionSettings, LLMSettings
from agent.types import ChatMessage, CompactionRecord, Usage, UsageRecord
from gateway.admin.app import create_app
from gateway.store.repository import Store
from tests.fakes.anthropic import FakeAnthropic
from tests.gateway.conftest import ChatResponder
from tests.store.helpers import append_turns, new_session, summary_plan

TOKEN = "admin-test-token-5f2c"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
XSS = "<script>alert(1)</script>"


@asynccontextmanager
async def admin_client(
    store: Store, *, authed: bool = True, engine: ContextEngine | None = None, window: int = 200_000
) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client talking to the admin app in-process (ASGI), with the token unless ``authed=False``;
    with ``engine`` it can compact (every model's window: ``window`` tokens)."""
    app = create_app(store, token=TOKEN, engine=engine, context_window=lambda _model: window)
    transport = httpx.ASGITransport(app=app)
    headers = AUTH if authed else {}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://admin.test", headers=headers
    ) as client:
        yield client


@dataclass(frozen=True)
class Seeded:
    session_id: str
    compactions: list[CompactionRecord]


async def chat_call(store: Store, session_id: str, prompt_tokens: int) -> None:
    await store.record_usage(
        session_id,
        UsageRecord(
            "claude-test",
            "chat",
            Usage(prompt_tokens // 10, 50, 0, prompt_tokens - prompt_tokens // 10),
            0.01,
        ),
    )


async def seed(store: Store) -> Seeded:
    """A session with 10 turns, chat calls growing, and two compactions (hygiene, then manual)."""
    sid = await new_session(store, "telegram:100", chat_id="100")
    turns = await append_turns(store, sid, 6)
    for tokens in (1000, 3000, 9000):
        await chat_call(store, sid, tokens)
    first = await store.archive_and_summarize(
        sid, summary_plan(turns[0:4], "first summary", trigger="hygiene")
    )
    await store.append_message(sid, ChatMessage.user(f"please render {XSS} safely"))
    await append_turns(store, sid, 3, prefix="later")
    for tokens in (2500, 7000):
        await chat_call(store, sid, tokens)
    active = await store.load_active(sid)
    second = await store.archive_and_summarize(
        sid, summary_plan(active[0:3], "second summary", trigger="manual")
    )
    await chat_call(store, sid, 2000)
    return Seeded(session_id=sid, compactions=[first, second])


@asynccontextmanager
async def summarizer() -> AsyncIterator[ContextCompressor]:
    """The real compressor, summarizing through the real SDK against the fake Anthropic server."""
    async with FakeAnthropic(responder=ChatResponder()) as fake:
        provider = AnthropicProvider(
            api_key="test", base_url=fake.base_url, settings=LLMSettings(max_retries=0)
        )
        try:
            yield ContextCompressor(CompressionSettings(), provider, summary_model="claude-haiku-4-5")
        finally:
            await provider.aclose()
