"""``hygieia mcp serve --http``: Streamable HTTP behind the admin token, through the SDK's client."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.fakes.mcp_tools import free_port
from tests.gateway.archive_server.conftest import RARE_WORD, TOKEN, Archive, answer


@asynccontextmanager
async def http_serve(env: dict[str, str]) -> AsyncIterator[str]:
    """``hygieia mcp serve --http`` on a free port; yields the endpoint's URL once it accepts."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "gateway.cli", "mcp", "serve", "--http", "--port", str(port)),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            assert proc.returncode is None, "the server exited while starting"
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            break
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


@asynccontextmanager
async def client_with(url: str, headers: dict[str, str]) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def test_with_the_token_search_read_and_get_work_over_http(archive: Archive) -> None:
    env = {**archive.env, "HYGIEIA_ADMIN_TOKEN": TOKEN}
    async with http_serve(env) as url, client_with(url, {"Authorization": f"Bearer {TOKEN}"}) as client:
        found = answer(await client.call_tool("search_sessions", {"query": RARE_WORD}))
        page = answer(await client.call_tool("read_session", {"session": archive.session_id, "limit": 2}))
        near = answer(await client.call_tool("get_message", {"message_id": archive.ids[0], "around": 1}))
    hits: list[Any] = found["hits"]
    assert [(h["message_id"], h["state"]) for h in hits] == [(archive.ids[0], "archived")]
    assert page["messages"][0]["id"] == archive.ids[0]
    assert near["messages"][0]["id"] == archive.ids[0] and len(near["messages"]) == 2


async def test_without_or_with_a_wrong_token_every_request_gets_401(archive: Archive) -> None:
    env = {**archive.env, "HYGIEIA_ADMIN_TOKEN": TOKEN}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with http_serve(env) as url, httpx2.AsyncClient() as http:
        statuses = [
            (await http.post(url, json=hello, headers=headers)).status_code
            for headers in (
                {},
                {"Authorization": f"Bearer {TOKEN}x"},
                {"Authorization": f"Basic {TOKEN}"},
                {"Authorization": "Bearer"},
            )
        ]
    assert statuses == [401, 401, 401, 401]


async def test_the_sdk_client_with_a_wrong_token_lists_nothing(archive: Archive) -> None:
    env = {**archive.env, "HYGIEIA_ADMIN_TOKEN": TOKEN}
    async with http_serve(env) as url:
        with pytest.raises(BaseExceptionGroup) as caught:
            async with client_with(url, {"Authorization": "Bearer wrong-token-wrong-token-wrong"}) as client:
                await client.list_tools()
    # The SDK reports the 401 as an error response to its first request: the handshake never completes.
    assert caught.group_contains(MCPError, match="error response", depth=None)


def test_http_without_the_admin_token_refuses_to_start(archive: Archive) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "mcp", "serve", "--http", "--port", str(free_port())],
        env=archive.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "HYGIEIA_ADMIN_TOKEN is not set" in result.stderr and "Traceback" not in result.stderr
