"""The admin token must be strong, and guessing it is throttled per client address (429, the right token
still answered), with a log line."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from agent.errors import ConfigError
from gateway.admin.app import create_app
from gateway.admin.middleware import MIN_TOKEN_CHARS, FailedLogins
from gateway.store.repository import Store
from tests.gateway.admin_support import AUTH, TOKEN
from tests.process_env import clean_env

WRONG = {"Authorization": "Bearer not-the-admin-token-at-all"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def client_from(store: Store, address: str, throttle: FailedLogins) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(store, token=TOKEN, failed_logins=throttle)
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://admin.test") as client:
        yield client


async def test_repeated_wrong_tokens_from_one_address_get_429_but_the_right_one_is_answered(
    store: Store,
) -> None:
    throttle = FailedLogins(max_failures=5, window_seconds=60, clock=Clock())
    async with client_from(store, "203.0.113.7", throttle) as client:
        statuses = [(await client.get("/api/sessions", headers=WRONG)).status_code for _ in range(5)]
        blocked = await client.get("/api/sessions", headers=WRONG)
        right = await client.get("/api/sessions", headers=AUTH)
    assert statuses == [401] * 5
    assert right.status_code == 200
    assert blocked.status_code == 429
    assert int(blocked.headers["retry-after"]) > 0
    assert "too many failed" in blocked.json()["error"]


async def test_another_address_is_not_throttled(store: Store) -> None:
    throttle = FailedLogins(max_failures=3, window_seconds=60, clock=Clock())
    async with client_from(store, "203.0.113.7", throttle) as attacker:
        for _ in range(4):
            await attacker.get("/api/sessions", headers=WRONG)
    async with client_from(store, "198.51.100.2", throttle) as admin:
        assert (await admin.get("/api/sessions", headers=AUTH)).status_code == 200


async def test_the_throttle_lifts_when_the_window_has_passed(store: Store) -> None:
    clock = Clock()
    throttle = FailedLogins(max_failures=3, window_seconds=60, clock=clock)
    async with client_from(store, "203.0.113.7", throttle) as client:
        for _ in range(3):
            await client.get("/api/sessions", headers=WRONG)
        assert (await client.get("/api/sessions", headers=WRONG)).status_code == 429
        clock.now += 61
        assert (await client.get("/api/sessions", headers=WRONG)).status_code == 401


async def test_a_wrong_cookie_or_login_link_counts_but_no_credentials_do_not(store: Store) -> None:
    throttle = FailedLogins(max_failures=3, window_seconds=60, clock=Clock())
    async with client_from(store, "203.0.113.7", throttle) as client:
        for _ in range(5):
            assert (await client.get("/api/sessions")).status_code == 401
        client.cookies.set("hygieia_admin", "forged")
        assert (await client.get("/")).status_code == 401
        client.cookies.clear()
        assert (await client.get("/?token=guess-number-two")).status_code == 401
        assert (await client.get("/api/sessions", headers=WRONG)).status_code == 401
        assert (await client.get("/api/sessions", headers=WRONG)).status_code == 429


async def test_failed_attempts_are_logged_with_the_address(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    throttle = FailedLogins(max_failures=2, window_seconds=60, clock=Clock())
    with caplog.at_level(logging.WARNING, logger="gateway.admin.middleware"):
        async with client_from(store, "203.0.113.7", throttle) as client:
            for _ in range(3):
                await client.get("/api/sessions", headers=WRONG)
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.admin.middleware"]
    assert any("failed admin authentication from 203.0.113.7" in line for line in lines)
    assert any("throttling 203.0.113.7" in line for line in lines)
    assert not any("not-the-admin-token" in line for line in lines)


@pytest.mark.parametrize("token", ["", "   ", "x", "short-token-15c", " " * 20])
def test_a_weak_token_is_refused_when_the_app_is_built(store: Store, token: str) -> None:
    with pytest.raises(ConfigError, match="HYGIEIA_ADMIN_TOKEN"):
        create_app(store, token=token)


@pytest.mark.parametrize("token", ["x", "                    ", "fifteen-chars!!"])
def test_admin_serve_refuses_a_weak_token_with_one_line(tmp_path: Path, token: str) -> None:
    env = {**clean_env(), "HYGIEIA_DATA_DIR": str(tmp_path), "HYGIEIA_ADMIN_TOKEN": token}
    result = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "admin", "serve", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "HYGIEIA_ADMIN_TOKEN" in lines[0] and str(MIN_TOKEN_CHARS) in lines[0]
