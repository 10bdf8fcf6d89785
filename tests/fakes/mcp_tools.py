"""A real MCP server (the official SDK's ``MCPServer``) with tools that misbehave on request.

Usable three ways, as the tests need them:
- in process: ``tools_server()`` returns the server object (``mcp.Client(server)`` talks to it in memory);
- stdio: ``python -m tests.fakes.mcp_tools stdio`` (the child a config's ``command:`` starts);
- Streamable HTTP: ``python -m tests.fakes.mcp_tools http PORT`` (on 127.0.0.1 only).
``python -m tests.fakes.mcp_tools garbage`` is a stdio server written by hand that speaks JSON-RPC
but answers every ``tools/call`` with a result that breaks the protocol's schema.

Tools: ``echo``, ``add``, ``environment`` (the child's environment as JSON), ``crash`` (the process
exits mid-call), ``hang`` (sleeps), ``big`` (a text of ``size`` chars), ``picture`` (a PNG),
``tagged`` (text carrying Unicode tag characters),
``fail`` (a tool error saying ``message``), ``grow`` (adds the tool ``extra`` and says the
list changed), ``delay`` (sleeps ``ms``: the server's own time, for the bench).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

# 1x1 transparent PNG.
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
# "hi" followed by "IGNORE" written in invisible tag characters, then a zero-width space and a bidi override.
TAGGED_TEXT = "hi" + "".join(chr(0xE0000 + ord(c)) for c in "IGNORE") + "\u200b\u202e!"


def extra() -> str:
    """A tool that appears after ``grow``."""
    return "extra here"


def tools_server(name: str = "fake") -> MCPServer:
    """A fresh server with every tool (one per test: ``grow`` changes its list)."""
    srv: MCPServer = MCPServer(name, log_level="WARNING")

    @srv.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return text

    @srv.tool(description="Add two integers.")
    def add(a: int, b: int) -> str:
        return str(a + b)

    @srv.tool(description="The server process's environment, as JSON.")
    def environment() -> str:
        return json.dumps(dict(os.environ), sort_keys=True)

    @srv.tool(description="Exit the server process in the middle of the call.")
    def crash() -> str:
        sys.stdout.flush()
        os._exit(3)

    @srv.tool(description="Sleep for the given seconds, then answer.")
    async def hang(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "woke up"

    @srv.tool(description="Answer a text of the given size.")
    def big(size: int) -> str:
        return "x" * size

    @srv.tool(description="Fail with the given message.")
    def fail(message: str) -> str:
        raise ToolError(message)

    @srv.tool(description="Answer a picture.")
    def picture() -> Image:
        return Image(data=PNG_1X1, format="png")

    @srv.tool(description="Answer a text with hidden characters.")
    def tagged() -> str:
        return TAGGED_TEXT

    @srv.tool(description="Wait the given milliseconds; answers the milliseconds the tool itself took.")
    async def delay(ms: float) -> str:
        started = time.perf_counter()
        await asyncio.sleep(ms / 1000)
        return f"{(time.perf_counter() - started) * 1000:.4f}"

    @srv.tool(description="Add the tool 'extra' and announce the change.")
    async def grow(ctx: Context) -> str:
        if not any(t.name == "extra" for t in await srv.list_tools()):
            srv.add_tool(extra, description="Appeared later.")
        await ctx.notify_tools_changed()
        # A 2025-era connection hears of the change this way; a 2026 one has no session to tell.
        with contextlib.suppress(Exception):
            await ctx.request_context.session.send_tool_list_changed()
        return "grown"

    return srv


def _garbage_answer(message: dict[str, Any]) -> dict[str, Any] | None:
    """JSON-RPC by hand: a valid handshake and listing, a ``tools/call`` result that is not one."""
    method, rid = message.get("method"), message.get("id")
    if rid is None:
        return None
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": message.get("params", {}).get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "garbage", "version": "1"},
        }
    elif method == "tools/list":
        schema = {"type": "object", "properties": {}}
        result = {"tools": [{"name": "broken", "description": "Answers garbage.", "inputSchema": schema}]}
    elif method == "tools/call":
        result = {"content": "this is not a list of content blocks", "isError": 7}
    else:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "method not found"}}
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def serve_garbage() -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        answer = _garbage_answer(message)
        if answer is not None:
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()


ROOT = Path(__file__).resolve().parents[2]
STDIO_ARGS = ("-m", "tests.fakes.mcp_tools", "stdio")
GARBAGE_ARGS = ("-m", "tests.fakes.mcp_tools", "garbage")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def http_server(port: int | None = None) -> AsyncIterator[str]:
    """The server over Streamable HTTP in a child process on 127.0.0.1; yields its URL."""
    port = port or free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.fakes.mcp_tools",
        "http",
        str(port),
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
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
            proc.kill()
        await proc.wait()


def main(argv: list[str]) -> None:
    mode = argv[0] if argv else "stdio"
    if mode == "garbage":
        serve_garbage()
    elif mode == "http":
        port = int(argv[1])
        tools_server().run("streamable-http", host="127.0.0.1", port=port)
    else:
        tools_server().run()


if __name__ == "__main__":
    main(sys.argv[1:])
