"""One connection against real MCP servers of the SDK: in process, a stdio child, Streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from agent.tools.mcp_servers import ServerConnection, ServerSpec
from tests.fakes.mcp_tools import GARBAGE_ARGS, ROOT, STDIO_ARGS, free_port, http_server, tools_server


def stdio_spec(name: str = "fake", **kw: Any) -> ServerSpec:
    return ServerSpec(name=name, command=sys.executable, args=STDIO_ARGS, cwd=str(ROOT), **kw)


@asynccontextmanager
async def connected(spec: ServerSpec, target: Any = None) -> AsyncIterator[ServerConnection]:
    connection = ServerConnection(spec, target=target, backoff=(0.05, 0.2), keepalive_seconds=5)
    async with connection:
        yield connection


async def test_a_stdio_server_answers_a_call() -> None:
    async with connected(stdio_spec()) as conn:
        assert conn.state.status == "up"
        output = await conn.call("add", {"a": 2, "b": 3})
    assert (output.text, output.is_error) == ("5", False)


async def test_an_http_server_answers_a_call() -> None:
    async with http_server() as url, connected(ServerSpec(name="web", url=url)) as conn:
        output = await conn.call("echo", {"text": "over http"})
    assert output.text == "over http"


async def test_an_in_process_server_answers_a_call() -> None:
    async with connected(ServerSpec(name="mem", url="memory"), target=tools_server()) as conn:
        output = await conn.call("echo", {"text": "in memory"})
    assert output.text == "in memory"


async def test_a_server_down_at_start_is_a_state_and_its_calls_say_why() -> None:
    spec = ServerSpec(name="github", url=f"http://127.0.0.1:{free_port()}/mcp", connect_timeout_seconds=2)
    async with connected(spec) as conn:
        assert conn.state.status == "down"
        output = await conn.call("anything", {})
    assert output.is_error
    assert output.text.startswith("server github is unavailable: down since ")


async def test_a_server_that_comes_up_later_is_connected_by_the_retries() -> None:
    port = free_port()
    async with connected(ServerSpec(name="late", url=f"http://127.0.0.1:{port}/mcp")) as conn:
        assert conn.state.status == "down"
        async with http_server(port):
            for _ in range(400):
                if conn.state.status == "up":
                    break
                await asyncio.sleep(0.05)
            output = await conn.call("echo", {"text": "back"})
    assert output.text == "back"


async def test_a_stdio_server_crashing_mid_call_costs_that_call_only() -> None:
    async with connected(stdio_spec(name="crashy")) as conn:
        output = await conn.call("crash", {})
        assert output.is_error and output.text.startswith("server crashy is unavailable")
        for _ in range(200):
            again = await conn.call("add", {"a": 1, "b": 1})
            if not again.is_error:
                break
            await asyncio.sleep(0.05)
    assert again.text == "2"


async def test_an_http_server_crashing_mid_call_costs_that_call_only() -> None:
    async with http_server() as url, connected(ServerSpec(name="web", url=url)) as conn:
        output = await conn.call("crash", {})
        assert output.is_error and output.text.startswith("server web is unavailable")
        after = await conn.call("echo", {"text": "x"})
    assert after.is_error


async def test_a_hanging_call_ends_at_the_servers_timeout() -> None:
    loop = asyncio.get_running_loop()
    async with connected(stdio_spec(name="slow", timeout_seconds=0.5)) as conn:
        started = loop.time()
        output = await conn.call("hang", {"seconds": 30})
        waited = loop.time() - started
        quick = await conn.call("echo", {"text": "still here"})
    assert output.is_error and "no answer within 0.5 s" in output.text
    assert waited < 5
    assert quick.text == "still here"


async def test_a_5mb_answer_arrives_whole() -> None:
    async with connected(stdio_spec()) as conn:
        output = await conn.call("big", {"size": 5 * 1024 * 1024})
    assert len(output.text) == 5 * 1024 * 1024


async def test_a_malformed_result_is_a_tool_error() -> None:
    spec = ServerSpec(name="garbage", command=sys.executable, args=GARBAGE_ARGS, cwd=str(ROOT))
    async with connected(spec) as conn:
        assert [t.name for t in conn.listed] == ["broken"]
        output = await conn.call("broken", {})
    assert output.is_error
    assert (
        output.text == "the broken tool of server garbage failed: its answer is not a valid MCP tool result"
    )


async def test_a_changed_tool_list_is_listed_again() -> None:
    async with connected(stdio_spec()) as conn:
        assert "extra" not in [t.name for t in conn.listed]
        await conn.call("grow", {})
        for _ in range(100):
            if "extra" in [t.name for t in conn.listed]:
                break
            await asyncio.sleep(0.05)
    assert "extra" in [t.name for t in conn.listed]


async def test_the_childs_environment_holds_no_token_of_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-ours-never-theirs")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:ours")
    monkeypatch.setenv("HYGIEIA_ADMIN_TOKEN", "admin-ours")
    async with connected(stdio_spec(env={"GITHUB_TOKEN": "theirs"})) as conn:
        output = await conn.call("environment", {})
    env = json.loads(output.text)
    assert env["GITHUB_TOKEN"] == "theirs"
    assert "PATH" in env
    assert not {"ANTHROPIC_API_KEY", "TELEGRAM_BOT_TOKEN", "HYGIEIA_ADMIN_TOKEN"} & set(env)
    assert not any("ours" in value for value in env.values())


async def test_tag_characters_are_stripped_from_tool_text() -> None:
    async with connected(stdio_spec()) as conn:
        output = await conn.call("tagged", {})
    assert output.text == "hi!"


async def test_an_image_becomes_an_image_block() -> None:
    async with connected(ServerSpec(name="mem", url="memory"), target=tools_server()) as conn:
        output = await conn.call("picture", {})
    assert [block["type"] for block in output.media] == ["image"]
    assert output.media[0]["source"]["media_type"] == "image/png"


async def test_a_stopped_turn_cancels_its_call_at_once_and_the_server_stays_usable() -> None:
    loop = asyncio.get_running_loop()
    async with connected(
        ServerSpec(name="mem", url="memory", timeout_seconds=30), target=tools_server()
    ) as conn:
        call = asyncio.create_task(conn.call("hang", {"seconds": 30}))
        await asyncio.sleep(0.2)
        started = loop.time()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert loop.time() - started < 2
        after = await conn.call("echo", {"text": "still up"})
    assert after.text == "still up"
