"""The API as the tests drive it: the whole service (``gateway.runner.Service``) with the ``api``
platform on 127.0.0.1, the fake Messages API, the SQL store, and the official ``openai`` client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from openai import AsyncOpenAI

from gateway.config import Settings
from gateway.platforms.http_api.adapter import ApiAdapter
from gateway.runner import Service, build_adapters
from tests.fakes.anthropic import FakeAnthropic
from tests.gateway.conftest import MODEL, ChatResponder

ALICE_KEY = "alice-key-0123456789abcdefghij"
BOB_KEY = "bob-key-0123456789abcdefghijkl"
KEYS = f"alice={ALICE_KEY},bob={BOB_KEY}"


@dataclass
class Api:
    service: Service
    adapter: ApiAdapter
    base_url: str
    clients: list[AsyncOpenAI] = field(default_factory=list)

    def client(self, key: str = ALICE_KEY, **kw: Any) -> AsyncOpenAI:
        """The official client (closed with the service); no retries of its own, so each test sees
        each answer."""
        client = AsyncOpenAI(api_key=key, base_url=self.base_url, max_retries=0, **kw)
        self.clients.append(client)
        return client

    def http(self, key: str | None = ALICE_KEY) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
        return httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=30)


def api_settings(tmp_path: Path, db_url: str, model_api: FakeAnthropic, **overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "data_dir": tmp_path,
        "database_url": db_url,
        "anthropic_api_key": "test",
        "anthropic_base_url": model_api.base_url,
        "model": MODEL,
        "llm": {"max_retries": 0},
        "api_keys": KEYS,
        "api": {"host": "127.0.0.1", "port": 0},
        "sessions": {"turn_grace_seconds": 0.5},
        "delivery": {"edit_interval_seconds": 0.2},
    }
    base.update(overrides)
    return Settings(**base)


@asynccontextmanager
async def serving_api(settings: Settings) -> AsyncIterator[Api]:
    """The service with only the API, started; stopped at the end."""
    adapters = build_adapters(settings, ["api"])
    service = await Service.build(settings, adapters)
    adapter = next(a for a in service.adapters if isinstance(a, ApiAdapter))
    async with service:
        api = Api(service, adapter, f"http://127.0.0.1:{adapter.door.port}/v1")
        try:
            yield api
        finally:
            for client in api.clients:
                await client.close()


@asynccontextmanager
async def api_and_model(
    tmp_path: Path, db_url: str, responder: ChatResponder | None = None, **overrides: Any
) -> AsyncIterator[tuple[Api, FakeAnthropic, ChatResponder]]:
    responder = responder or ChatResponder()
    window = overrides.pop("context_window", None)
    async with FakeAnthropic(responder=responder, context_window=window) as fake:
        if window is not None:
            overrides["context_window"] = window
        settings = api_settings(tmp_path, db_url, fake, **overrides)
        async with serving_api(settings) as api:
            yield api, fake, responder
