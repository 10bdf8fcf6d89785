"""The throttle on a real uvicorn server: X-Forwarded-For counts only from a configured proxy, and the
right token is answered even while its address is throttled."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import httpx
import pytest

from gateway.admin.app import create_app
from gateway.admin.middleware import MAX_FAILURES
from gateway.admin.server import AdminServer
from gateway.config import AdminSettings
from gateway.store.repository import Store
from tests.gateway.admin_support import AUTH, TOKEN
from tests.store.engines import only

WRONG = {"Authorization": "Bearer not-the-admin-token-at-all"}


@asynccontextmanager
async def served(store: Store, trusted_proxies: Sequence[str] = ()) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(store, token=TOKEN)
    server = AdminServer(app, host="127.0.0.1", port=0, trusted_proxies=trusted_proxies)
    async with server, httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=10) as client:
        yield client


def forwarded(n: int) -> dict[str, str]:
    return {**WRONG, "X-Forwarded-For": f"198.51.100.{n % 250 + 1}"}


@only("sqlite")
async def test_rotating_x_forwarded_for_does_not_escape_the_throttle(store: Store) -> None:
    async with served(store) as client:
        statuses = [(await client.get("/api/sessions", headers=forwarded(n))).status_code for n in range(40)]
    assert statuses[:MAX_FAILURES] == [401] * MAX_FAILURES
    assert statuses[MAX_FAILURES:] == [429] * (40 - MAX_FAILURES)


@only("sqlite")
async def test_a_configured_proxy_s_forwarded_address_is_the_client(store: Store) -> None:
    async with served(store, trusted_proxies=["127.0.0.1"]) as client:
        for _ in range(MAX_FAILURES):
            await client.get("/api/sessions", headers={**WRONG, "X-Forwarded-For": "203.0.113.7"})
        attacker = await client.get("/api/sessions", headers={**WRONG, "X-Forwarded-For": "203.0.113.7"})
        other = await client.get("/api/sessions", headers={**WRONG, "X-Forwarded-For": "203.0.113.8"})
    assert attacker.status_code == 429
    assert other.status_code == 401


@only("sqlite")
async def test_the_right_token_is_answered_while_its_address_is_throttled(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="gateway.admin.middleware"):
        async with served(store) as client:
            for _ in range(MAX_FAILURES):
                await client.get("/api/sessions", headers=WRONG)
            right = await client.get("/api/sessions", headers=AUTH)
            wrong = await client.get("/api/sessions", headers=WRONG)
            login = await client.get("/?token=" + TOKEN, follow_redirects=False)
    assert right.status_code == 200
    assert wrong.status_code == 429
    assert login.status_code == 303
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.admin.middleware"]
    assert any("throttling 127.0.0.1" in line for line in lines)
    assert sum("failed admin authentication from 127.0.0.1" in line for line in lines) == MAX_FAILURES


def test_no_proxy_is_trusted_by_default() -> None:
    assert AdminSettings().trusted_proxies == []


@pytest.mark.parametrize("entry", ["localhost", "300.1.1.1", "10.0.0.0/33", ""])
def test_a_trusted_proxy_must_be_an_address_or_network(entry: str) -> None:
    with pytest.raises(ValueError, match="trusted_proxies"):
        AdminSettings(trusted_proxies=[entry])


def test_trusted_proxies_accept_addresses_and_networks() -> None:
    settings = AdminSettings(trusted_proxies=["10.0.0.0/8", "::1", "192.168.1.4"])
    assert settings.trusted_proxies == ["10.0.0.0/8", "::1", "192.168.1.4"]
