"""MCP tool calls as the operator sees them: the session page's table and the per-server
Prometheus series (calls, errors, latency), read from the store on scrape."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from agent.tools.calls import ToolCallRecord
from gateway.admin.page import esc, when
from gateway.store.repository import Store
from gateway.store.tool_call_ops import LATENCY_BUCKETS, ServerCallTotals


def tool_calls_table(calls: Sequence[ToolCallRecord]) -> str:
    """The session's MCP tool calls, newest first (nothing when it made none)."""
    if not calls:
        return ""
    rows = "".join(
        f"<tr><td>{when(c.started_at)}</td><td>{esc(c.server)}</td><td>{esc(c.tool)}</td>"
        f'<td class="n">{c.duration_ms:,.0f} ms</td><td class="n">{c.output_chars:,}</td>'
        f"<td>{esc(c.error or '')}</td></tr>"
        for c in calls
    )
    head = (
        '<tr><th>when</th><th>server</th><th>tool</th><th class="n">duration</th>'
        '<th class="n">output chars</th><th>error</th></tr>'
    )
    return f"<h2>Tool calls</h2><table>{head}{rows}</table>"


class _Totals(Collector):
    def __init__(self, totals: dict[str, ServerCallTotals]) -> None:
        self._totals = totals

    def collect(self) -> Iterator[Metric]:
        calls = CounterMetricFamily("hygieia_mcp_calls", "MCP tool calls, by server.", labels=["server"])
        errors = CounterMetricFamily(
            "hygieia_mcp_call_errors",
            "MCP tool calls that ended in a tool error, by server.",
            labels=["server"],
        )
        latency = HistogramMetricFamily(
            "hygieia_mcp_call_duration_seconds", "MCP tool call latency, by server.", labels=["server"]
        )
        for server, t in sorted(self._totals.items()):
            calls.add_metric([server], t.calls)
            errors.add_metric([server], t.errors)
            buckets = [(f"{bound:g}", float(n)) for bound, n in zip(LATENCY_BUCKETS, t.within, strict=True)]
            latency.add_metric([server], [*buckets, ("+Inf", float(t.calls))], t.seconds)
        yield from (calls, errors, latency)


async def tool_call_metrics(store: Store) -> bytes:
    """The per-server series in the Prometheus text format (appended to the admin's ``/metrics``)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Totals(await store.tool_call_totals()))
    return generate_latest(registry)
