"""Hostile and malformed tool calls to ``hygieia mcp serve``: each is a one-line tool error or a plain
answer, never a traceback, and the server answers a good call afterwards."""

from __future__ import annotations

import sys
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters

from tests.gateway.archive_server.conftest import RARE_WORD, Archive, answer

HUGE = "flew " * 40_000
ODD = "\x00 \u202equetzal\u200d\ufeff 𝔮 ﷽"

# (tool, arguments, what it must get: "error" a tool error, "answer" a JSON answer)
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("search_sessions", {}, "error"),
    ("search_sessions", {"query": 42}, "error"),
    ("search_sessions", {"query": None}, "error"),
    ("search_sessions", {"query": ""}, "answer"),
    ("search_sessions", {"query": HUGE}, "answer"),
    ("search_sessions", {"query": ODD}, "answer"),
    ("search_sessions", {"query": "*"}, "answer"),
    ("search_sessions", {"query": "a OR b AND NOT c NEAR(d)"}, "answer"),
    ("search_sessions", {"query": "'; DROP TABLE messages; --"}, "answer"),
    ("search_sessions", {"query": RARE_WORD, "limit": 0}, "error"),
    ("search_sessions", {"query": RARE_WORD, "limit": 10**12}, "error"),
    ("search_sessions", {"query": RARE_WORD, "limit": "ten"}, "error"),
    ("search_sessions", {"query": RARE_WORD, "state": "deleted"}, "error"),
    ("search_sessions", {"query": RARE_WORD, "sort": "random"}, "error"),
    ("search_sessions", {"query": RARE_WORD, "until": "9999-99-99"}, "error"),
    ("search_sessions", {"query": RARE_WORD, "since": "2026-12-01", "until": "2020-01-01"}, "answer"),
    ("search_sessions", {"query": RARE_WORD, "session": ""}, "answer"),  # an empty filter is none
    ("search_sessions", {"query": RARE_WORD, "chat": ODD}, "answer"),
    ("read_session", {}, "error"),
    ("read_session", {"session": "%"}, "error"),
    ("read_session", {"session": "_" * 8}, "error"),
    ("read_session", {"session": ODD}, "error"),
    ("read_session", {"session": "x" * 100_000}, "error"),
    ("read_session", {"session": "console:alice", "offset": -1}, "error"),
    ("read_session", {"session": "console:alice", "limit": 201}, "error"),
    ("get_message", {"message_id": -1}, "error"),
    ("get_message", {"message_id": 2**63}, "error"),
    ("get_message", {"message_id": "1; SELECT 1"}, "error"),
    ("get_message", {"message_id": 1.5}, "error"),
    ("get_message", {"message_id": 1, "around": 21}, "error"),
    ("get_message", {"message_id": 1, "around": -1}, "error"),
    ("no_such_tool", {"query": RARE_WORD}, "error"),
]


def _one_line_error(result: types.CallToolResult) -> str:
    assert result.is_error
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_every_hostile_call_gets_a_clear_answer_and_the_server_goes_on(archive: Archive) -> None:
    got: list[tuple[str, str]] = []
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gateway.cli", "mcp", "serve"], env=archive.env
    )
    async with Client(params) as client:
        for tool, arguments, _ in CASES:
            result = await client.call_tool(tool, arguments)
            if result.is_error:
                text = _one_line_error(result)
                assert "Traceback" not in text and len(text) < 2_000, (tool, arguments, text[:300])
                got.append((tool, "error"))
            else:
                answer(result)
                got.append((tool, "answer"))
        found = answer(await client.call_tool("search_sessions", {"query": RARE_WORD}))
    assert got == [(tool, expected) for tool, _, expected in CASES]
    assert [h["message_id"] for h in found["hits"]] == [archive.ids[0]]
