"""Serving the admin app for real: AdminServer's lifecycle, and `hygieia admin serve` as a process."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agent.errors import ConfigError
from gateway.admin.app import create_app
from gateway.admin.server import AdminServer, page_url
from gateway.store.db import Database
from gateway.store.migrate import upgrade_to_head
from gateway.store.repository import Store
from tests.gateway.admin_support import AUTH, TOKEN
from tests.process_env import clean_env
from tests.store.engines import only
from tests.store.helpers import new_session


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = clean_env()
    clean["HYGIEIA_DATA_DIR"] = str(tmp_path / "data")
    clean["HYGIEIA_LOG_FORMAT"] = "text"
    return clean


@only("sqlite")
async def test_admin_server_serves_over_http_until_stopped(store: Store) -> None:
    async with AdminServer(create_app(store, token=TOKEN), host="127.0.0.1", port=0) as server:
        url = f"http://127.0.0.1:{server.port}"
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/healthz")).json() == {"ok": True}
            assert (await client.get("/api/sessions", headers=AUTH)).status_code == 200
            long_query = await client.get("/api/search", params={"q": "🙂" * 2500}, headers=AUTH)
            assert (long_query.status_code, long_query.json()) == (200, [])
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.get(f"{url}/healthz")


@only("sqlite")
async def test_admin_server_on_a_taken_port_is_a_config_error(store: Store) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = AdminServer(create_app(store, token=TOKEN), host="127.0.0.1", port=taken.getsockname()[1])
        with pytest.raises(ConfigError, match="cannot listen"):
            await server.start()


async def test_admin_serve_answers_over_http_and_exits_0_on_sigterm(
    env: dict[str, str], tmp_path: Path
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'data' / 'hygieia.db'}"
    await upgrade_to_head(url)
    async with Database(url) as db:
        sid = await new_session(Store(db))
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "gateway.cli", "admin", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env={**env, "HYGIEIA_ADMIN_TOKEN": TOKEN},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            health = await _when_up(client, process)
            sessions = await client.get("/api/sessions", headers=AUTH)
            refused = await client.get("/api/sessions")
        assert (health.status_code, health.json()) == (200, {"ok": True})
        assert sessions.status_code == 200 and [s["id"] for s in sessions.json()] == [sid]
        assert refused.status_code == 401
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 20)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, stderr
    assert TOKEN.encode() not in stderr and b"Traceback" not in stderr
    assert b"admin API listening" in stderr


async def test_admin_serve_prints_the_page_s_address_and_that_the_token_is_hygieia_admin_token(
    env: dict[str, str],
) -> None:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "gateway.cli", "admin", "serve", "--host", "0.0.0.0", "--port", str(port)],
        env={**env, "HYGIEIA_ADMIN_TOKEN": TOKEN},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        first = await asyncio.wait_for(process.stdout.readline(), 60)
        second = await asyncio.wait_for(process.stdout.readline(), 10)
        async with httpx.AsyncClient(timeout=5) as client:
            form = await client.get(first.decode().split(": ", 1)[1].strip(), headers={"Accept": "text/html"})
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.communicate(), 20)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert first.decode().strip() == f"Admin page: http://127.0.0.1:{port}/"  # an address a browser opens
    assert "HYGIEIA_ADMIN_TOKEN" in second.decode() and TOKEN not in second.decode()
    assert form.status_code == 401 and 'action="/login"' in form.text  # what is there: the sign-in form


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8090/"),
        ("0.0.0.0", "http://127.0.0.1:8090/"),
        ("::", "http://[::1]:8090/"),
        ("::1", "http://[::1]:8090/"),
        ("admin.internal", "http://admin.internal:8090/"),
    ],
)
def test_the_page_s_address_is_one_a_browser_can_open(host: str, url: str) -> None:
    assert page_url(host, 8090) == url


async def _when_up(client: httpx.AsyncClient, process: asyncio.subprocess.Process) -> httpx.Response:
    # Generous: starting the interpreter and importing the service takes seconds on a loaded machine.
    deadline = asyncio.get_running_loop().time() + 60
    while asyncio.get_running_loop().time() < deadline:
        if process.returncode is not None:
            raise AssertionError(f"admin serve exited early: {(await process.communicate())[1]!r}")
        try:
            return await client.get("/healthz")
        except httpx.TransportError:
            await asyncio.sleep(0.05)
    raise AssertionError("admin serve did not come up within 60 s")


def test_admin_serve_refuses_to_start_without_the_token(env: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "admin", "serve", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "HYGIEIA_ADMIN_TOKEN" in lines[0]
