"""Deferred loading: a large MCP catalog goes behind the tool search tool, our own tools stay
loaded, and a turn searches, loads a tool, calls it and answers, through the real loop."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.llm import AnthropicProvider
from agent.provider import LLMRequest
from agent.settings import LLMSettings
from agent.tools import ToolContext, ToolOutput, ToolRegistry, default_registry
from agent.tools.base import JSONObject, Tool
from agent.tools.deferral import SEARCH_TOOL_NAMES, ToolDeferral, definitions_tokens
from agent.tools.mcp_servers import McpCatalog, ServerSpec
from agent.tools.scope import ToolScope
from agent.types import ChatMessage, ContextState
from tests.agent.loop_support import MODEL, rig
from tests.fakes.anthropic import FakeAnthropic, _problems, text_reply
from tests.fakes.anthropic_tool_search import definition_tokens, loaded_definitions, tool_search_reply
from tests.fakes.mcp_catalog import catalog_server

OWN = {"memory", "recall", "session_search"}


@asynccontextmanager
async def wide(count: int = 60, deferral: ToolDeferral | None = None) -> AsyncIterator[ToolRegistry]:
    """The built-in tools plus an in-process MCP server of ``count`` wordy tools."""
    registry = default_registry()
    if deferral is not None:
        registry.deferral = deferral
    async with McpCatalog(
        [ServerSpec(name="wide", url="memory")], targets={"wide": catalog_server(count)}
    ) as cat:
        registry.add_source(cat)
        yield registry


def results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        b
        for m in body["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


async def test_a_60_tool_catalog_loads_under_3000_tokens_of_definitions_per_request() -> None:
    async with wide() as registry, rig(tools=registry) as r:
        r.script.add(lambda body: tool_search_reply(body, "get weather forecasts", call={"target": "Oslo"}))
        await r.turn("weather in Oslo?")
        await r.turn("thanks")
    assert len(r.script.chat_bodies) == 3
    for body in r.script.chat_bodies:
        assert len(body["tools"]) == 64
        assert definition_tokens(body) < 3000
    everything = [
        {k: v for k, v in t.items() if k != "defer_loading"} for t in r.script.chat_bodies[0]["tools"][:-1]
    ]
    assert definition_tokens({"tools": everything, "messages": []}) > 10_000


async def test_a_turn_searches_loads_the_tool_calls_it_and_answers_with_its_result() -> None:
    async with wide() as registry, rig(tools=registry) as r:
        r.script.add(
            lambda body: tool_search_reply(body, "get weather forecasts", call={"target": "Oslo"}),
            lambda body: text_reply(f"got {results(body)[-1]['content']}"),
        )
        result = await r.turn("weather in Oslo?")
        await r.assert_valid()
        stored = await r.stored()
    assert json.loads(result.final_text.removeprefix("got "))["tool"] == "get_forecasts"
    kinds = [b["type"] for b in stored[1].content]
    assert kinds == ["server_tool_use", "tool_search_tool_result", "tool_use"]
    # Sent back as they came: the second request carries the server blocks verbatim.
    sent = r.script.chat_bodies[1]["messages"][1]["content"]
    assert sent == stored[1].content
    refs = sent[1]["content"]["tool_references"]
    assert refs[0] == {"type": "tool_reference", "tool_name": "mcp_wide_get_forecasts"}


async def test_below_the_threshold_nothing_is_deferred() -> None:
    async with wide(count=6) as registry, rig(tools=registry) as r:
        await r.turn("hello")
    tools = r.script.chat_bodies[0]["tools"]
    assert len(tools) == 9
    assert not [t for t in tools if t.get("defer_loading") or t["name"] in SEARCH_TOOL_NAMES]


async def test_our_own_tools_are_never_deferred() -> None:
    async with wide(count=6, deferral=ToolDeferral(above_tokens=0)) as registry:
        definitions = registry.offer(None, ContextState()).definitions()
    deferred = {t["name"] for t in definitions if t.get("defer_loading")}
    assert {t["name"] for t in loaded_definitions({"tools": definitions})} == OWN | {"tool_search_tool_bm25"}
    assert len(deferred) == 6 and all(name.startswith("mcp_wide_") for name in deferred)


async def test_the_regex_setting_sends_the_regex_search_tool() -> None:
    async with wide(deferral=ToolDeferral(search="regex")) as registry:
        definitions = registry.offer().definitions()
    assert definitions[-1] == {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}


async def test_the_deferral_decision_is_frozen_with_the_sessions_offer() -> None:
    async with wide() as registry:
        state = ContextState()
        first = registry.offer(None, state).definitions()
        registry.deferral = None  # a new decision applies from the next session or compaction
        again = registry.offer(None, state).definitions()
        fresh = registry.offer(None, ContextState()).definitions()
    assert again == first and first[-1]["name"] == "tool_search_tool_bm25"
    assert not any(t.get("defer_loading") for t in fresh)


async def test_a_call_whose_search_was_compacted_away_loads_its_tool_up_front() -> None:
    async with wide() as registry, rig(tools=registry) as r:
        # The search that loaded the tool was archived; the call and its result remain.
        await r.preload(
            [
                ChatMessage.user("weather in Oslo?"),
                ChatMessage(
                    role="assistant",
                    content=[
                        {
                            "type": "tool_use",
                            "id": "toolu_x1",
                            "name": "mcp_wide_get_forecasts",
                            "input": {"target": "Oslo"},
                        }
                    ],
                ),
                ChatMessage(
                    role="user",
                    content=[{"type": "tool_result", "tool_use_id": "toolu_x1", "content": "rain"}],
                ),
                ChatMessage.assistant("it rains"),
            ]
        )
        result = await r.turn("and tomorrow?")
    assert result.final_text.startswith("ack")
    tools = {t["name"]: t for t in r.script.chat_bodies[0]["tools"]}
    assert "defer_loading" not in tools["mcp_wide_get_forecasts"]
    assert tools["mcp_wide_list_issues"]["defer_loading"] is True


class Named(Tool):
    """A catalog tool of the hypothesis test (never run)."""

    def __init__(self, name: str, description: str, props: int) -> None:
        self.name = name
        self.description = description
        self.input_schema: JSONObject = {
            "type": "object",
            "properties": {
                f"p{i}": {"type": "string", "description": description[:40]} for i in range(props)
            },
        }

    async def run(self, ctx: ToolContext, tool_input: JSONObject) -> ToolOutput:
        return ToolOutput("unused")


class Source:
    def __init__(self, tools: list[Tool]) -> None:
        self.tools = tools

    def tools_for(self, scope: ToolScope) -> list[Tool]:
        return self.tools


catalogs = st.lists(
    st.tuples(
        st.from_regex(r"mcp_[a-z][a-z0-9_]{0,30}", fullmatch=True),
        st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=400),
        st.integers(0, 6),
    ),
    max_size=40,
    unique_by=lambda t: t[0],
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=catalogs, above=st.integers(0, 6000), variant=st.sampled_from(["bm25", "regex"]))
def test_requests_built_with_deferral_stay_valid_for_the_fake(
    catalog: list[tuple[str, str, int]], above: int, variant: Any
) -> None:
    registry = default_registry()
    registry.deferral = ToolDeferral(above, variant)
    registry.add_source(Source([Named(name, text, props) for name, text, props in catalog]))
    definitions = registry.offer(None, ContextState()).definitions()
    body = {
        "model": MODEL,
        "max_tokens": 100,
        "tools": definitions,
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert _problems(body) == []
    deferred = {t["name"] for t in definitions if t.get("defer_loading")}
    assert not deferred & OWN
    plain = [t for t in definitions if t.get("name") not in SEARCH_TOOL_NAMES]
    over = definitions_tokens([{k: v for k, v in t.items() if k != "defer_loading"} for t in plain]) > above
    assert bool(deferred) == (over and bool(catalog))
    if deferred:
        # The model searches for a deferred tool by its name, loads it and calls it: still valid.
        name = sorted(deferred)[0]
        query = re.escape(name) if variant == "regex" else name.replace("_", " ")
        reply = tool_search_reply(body, query, call={})
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": reply.content},
        ]
        uses = [b for b in reply.content if b["type"] == "tool_use"]
        if uses:
            messages.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": uses[0]["id"], "content": "ok"}],
                }
            )
        assert _problems({**body, "messages": messages}) == []


async def test_a_streamed_search_arrives_whole_for_storing() -> None:
    async with wide() as registry, FakeAnthropic() as fake:
        tools = registry.offer().definitions()
        fake.responder = lambda body: tool_search_reply(
            body, "get weather forecasts", call={"target": "Oslo"}
        )
        provider = AnthropicProvider(
            api_key="test", base_url=fake.base_url, settings=LLMSettings(max_retries=0)
        )
        try:
            request = LLMRequest(
                model=MODEL, messages=[{"role": "user", "content": "weather?"}], max_tokens=500, tools=tools
            )
            response = await provider.stream(request, lambda text: None)
        finally:
            await provider.aclose()
    use, result, call = response.content
    assert use["type"] == "server_tool_use" and use["input"] == {"query": "get weather forecasts"}
    assert result["tool_use_id"] == use["id"]
    assert result["content"]["tool_references"][0] == {
        "type": "tool_reference",
        "tool_name": "mcp_wide_get_forecasts",
    }
    assert call["name"] == "mcp_wide_get_forecasts" and call["input"] == {"target": "Oslo"}
