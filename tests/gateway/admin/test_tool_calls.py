"""MCP tool calls as the operator sees them: the session page lists them (server, tool, duration,
error) and ``/metrics`` counts calls, errors and latency per server. The calls are real ones, made
through the catalog against the SDK's server in process, recorded by the store as the runner wires it."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from agent.tools import ToolContext
from agent.tools.mcp_servers import McpCatalog, ServerSpec
from agent.tools.scope import ADMIN_SCOPE
from gateway.store.repository import Store
from tests.agent.loop_support import make_session
from tests.fakes.mcp_tools import tools_server
from tests.fakes.memory_store import InMemoryStore
from tests.gateway.admin_support import admin_client
from tests.store.helpers import new_session


async def make_calls(store: Store, session_id: str) -> None:
    spec = ServerSpec(name="fake", url="memory", timeout_seconds=0.3)
    async with McpCatalog([spec], targets={"fake": tools_server()}, observer=store.record_tool_call) as cat:
        tools = {t.name: t for t in cat.tools_for(ADMIN_SCOPE)}
        ctx = ToolContext(make_session(session_id), InMemoryStore(), "scope")
        await tools["mcp_fake_echo"].run(ctx, {"text": "hello"})
        await tools["mcp_fake_add"].run(ctx, {"a": 1, "b": 2})
        await tools["mcp_fake_hang"].run(ctx, {"seconds": 5})


async def test_the_session_page_lists_its_tool_calls(store: Store) -> None:
    sid = await new_session(store)
    await make_calls(store, sid)
    async with admin_client(store) as client:
        page = (await client.get(f"/sessions/{sid}")).text
    assert "<h2>Tool calls</h2>" in page
    table = page.split("<h2>Tool calls</h2>")[1].split("</table>")[0]
    assert table.count("<td>fake</td>") == 3
    assert "<td>echo</td>" in table and "<td>hang</td>" in table
    assert "server fake is unavailable: no answer within 0.3 s" in table


async def test_metrics_count_calls_errors_and_latency_per_server(store: Store) -> None:
    await make_calls(store, await new_session(store))
    async with admin_client(store) as client:
        text = (await client.get("/metrics")).text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    fake = (("server", "fake"),)
    assert samples[("hygieia_mcp_calls_total", fake)] == 3
    assert samples[("hygieia_mcp_call_errors_total", fake)] == 1
    assert samples[("hygieia_mcp_call_duration_seconds_count", fake)] == 3
    assert samples[("hygieia_mcp_call_duration_seconds_sum", fake)] >= 0.3
    assert samples[("hygieia_mcp_call_duration_seconds_bucket", (("le", "+Inf"), ("server", "fake")))] == 3


async def test_a_calls_error_line_is_kept_redacted(store: Store) -> None:
    sid = await new_session(store)
    secret = "sk-ant-api03-" + "q" * 40
    async with McpCatalog(
        [ServerSpec(name="fake", url="memory")],
        targets={"fake": tools_server()},
        observer=store.record_tool_call,
    ) as cat:
        tool = next(t for t in cat.tools_for(ADMIN_SCOPE) if t.name == "mcp_fake_fail")
        output = await tool.run(ToolContext(make_session(sid), InMemoryStore(), "scope"), {"message": secret})
    [call] = await store.session_tool_calls(sid)
    assert output.is_error and secret in output.text  # the model reads what the server said
    assert call.error is not None and secret not in call.error and "[REDACTED]" in call.error
