"""MCP tools inside a turn: the model calls one, reads its result, and big output keeps its place."""

from __future__ import annotations

import sys
from typing import Any

from agent.settings import LLMSettings
from agent.tools import default_registry
from agent.tools.mcp_servers import McpCatalog, ServerSpec
from tests.agent.loop_support import rig
from tests.fakes.anthropic import text_reply, tool_use_reply
from tests.fakes.mcp_tools import ROOT, STDIO_ARGS


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        b
        for m in body["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


async def test_a_turn_calls_a_stdio_tool_and_answers_with_its_result() -> None:
    spec = ServerSpec(name="fake", command=sys.executable, args=STDIO_ARGS, cwd=str(ROOT))
    registry = default_registry()
    async with McpCatalog([spec]) as cat:
        registry.add_source(cat)
        async with rig(tools=registry) as r:
            r.script.add(
                tool_use_reply("mcp_fake_add", {"a": 20, "b": 22}),
                lambda body: text_reply(f"the sum is {tool_results(body)[-1]['content']}"),
            )
            result = await r.turn("what is 20 + 22?")
            await r.assert_valid()
    assert result.final_text == "the sum is 42"
    offered = [t["name"] for t in r.script.chat_bodies[0]["tools"]]
    assert "mcp_fake_add" in offered and "memory" in offered


async def test_a_5mb_result_is_capped_with_a_pointer() -> None:
    spec = ServerSpec(name="fake", command=sys.executable, args=STDIO_ARGS, cwd=str(ROOT))
    registry = default_registry()
    async with McpCatalog([spec]) as cat:
        registry.add_source(cat)
        async with rig(tools=registry, llm=LLMSettings(max_retries=0, tool_output_cap_chars=2000)) as r:
            r.script.add(tool_use_reply("mcp_fake_big", {"size": 5 * 1024 * 1024}), text_reply("done"))
            await r.turn("fetch the big one")
            await r.assert_valid()
    content = tool_results(r.script.chat_bodies[-1])[-1]["content"]
    assert len(content) <= 2000
    assert "[output truncated at" in content and f"of {5 * 1024 * 1024} chars" in content


async def test_an_image_result_reaches_the_model_as_an_image_block() -> None:
    spec = ServerSpec(name="fake", command=sys.executable, args=STDIO_ARGS, cwd=str(ROOT))
    registry = default_registry()
    async with McpCatalog([spec]) as cat:
        registry.add_source(cat)
        async with rig(tools=registry) as r:
            r.script.add(tool_use_reply("mcp_fake_picture", {}), text_reply("a dot"))
            await r.turn("show me")
    content = tool_results(r.script.chat_bodies[-1])[-1]["content"]
    assert [b["type"] for b in content] == ["text", "image"]
