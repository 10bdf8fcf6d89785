"""Tokens of tool definitions per request, with and without deferred loading, for a large MCP catalog.

The catalog is tests/fakes/mcp_catalog.py (the official SDK's MCPServer, in process) beside our own
tools; the offer is built by the registry as a turn builds it. Tokens are counted as the fake
Messages API counts them (deferred definitions left out until a search loads them, then counted
where the search result stands), and by our own estimator.

    python bench/tool_definitions.py [--full]
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import _root  # noqa: F401  (the checkout's root on sys.path: the fake servers)
from _report import Report
from rich.console import Console
from rich.table import Table

from agent.tools import default_registry
from agent.tools.deferral import ToolDeferral, definitions_tokens
from agent.tools.mcp_servers import McpCatalog, ServerSpec
from tests.fakes.anthropic_tool_search import definition_tokens, tool_search_reply
from tests.fakes.mcp_catalog import catalog_server


async def offered(count: int, deferral: ToolDeferral | None) -> list[dict[str, Any]]:
    registry = default_registry()
    registry.deferral = deferral
    async with McpCatalog(
        [ServerSpec(name="wide", url="memory")], targets={"wide": catalog_server(count)}
    ) as cat:
        registry.add_source(cat)
        return registry.offer().definitions()


def after_search(tools: list[dict[str, Any]], query: str) -> dict[str, Any]:
    """A request whose history holds one search that loaded its matches (the API counts them there)."""
    body: dict[str, Any] = {"tools": tools, "messages": []}
    reply = tool_search_reply(body, query)
    body["messages"] = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": "thanks"},
    ]
    return body


async def main(full: bool) -> None:
    counts = [10, 30, 60] if full else [60]
    report = Report("tool_definitions", full=full)
    table = Table(
        title="Tokens of tool definitions per request (our 3 tools + an MCP catalog; "
        "the API count includes its tool-use prompt)"
    )
    for column in ("MCP tools", "case", "tools sent", "deferred", "API count", "our estimate"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for count in counts:
        plain = await offered(count, None)
        deferred = await offered(count, ToolDeferral(above_tokens=0))
        regex = await offered(count, ToolDeferral(above_tokens=0, search="regex"))
        searched = after_search(deferred, "get weather forecasts")
        cases = {
            "all loaded": {"tools": plain, "messages": []},
            "deferred bm25": {"tools": deferred, "messages": []},
            "deferred regex": {"tools": regex, "messages": []},
            "after a search (5 loaded)": searched,
        }
        for label, body in cases.items():
            tools = body["tools"]
            api = definition_tokens(body) if label != "after a search (5 loaded)" else _with_loaded(body)
            ours = definitions_tokens(tools)
            hidden = sum(1 for t in tools if t.get("defer_loading"))
            table.add_row(str(count), label, str(len(tools)), str(hidden), f"{api:,}", f"{ours:,}")
            report.add(f"{count} tools/{label}/api tokens", api, unit="tokens")
        saved = 1 - definition_tokens(cases["deferred bm25"]) / definition_tokens(cases["all loaded"])
        report.note(f"{count} tools/saved by deferral", round(saved, 3))
    Console().print(table)
    report.save()


def _with_loaded(body: dict[str, Any]) -> int:
    """The search's share counted too: the request's tokens minus the same request without tools
    or search blocks (what the definitions and the loaded ones cost it)."""
    from tests.fakes.anthropic_cache import count_tokens
    from tests.fakes.anthropic_tool_search import as_counted

    bare = {
        "tools": [],
        "messages": [{"role": "user", "content": "weather?"}, {"role": "user", "content": "thanks"}],
    }
    return count_tokens(as_counted(body)) - count_tokens(bare)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="10, 30 and 60 tools (default: 60)")
    asyncio.run(main(parser.parse_args().full))
