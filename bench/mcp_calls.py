"""MCP call overhead: what a tool call through our connection costs above the server's own time,
over stdio (a child process) and Streamable HTTP (127.0.0.1), p50 and p99.

The server is tests/fakes/mcp_tools.py (the official SDK's MCPServer); its ``delay`` tool measures
its own time and answers it, so the overhead is the wall time of ``ServerConnection.call`` (the SDK
client, the transport, our result mapping) minus what the tool itself took.

    python bench/mcp_calls.py [--full]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

import _root  # noqa: F401  (the checkout's root on sys.path: the fake servers)
from _report import Report
from rich.console import Console
from rich.table import Table

from agent.tools.mcp_servers import ServerConnection, ServerSpec
from tests.fakes.mcp_tools import ROOT, STDIO_ARGS, http_server


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(spec: ServerSpec, calls: int, server_ms: float) -> list[float]:
    overheads: list[float] = []
    async with ServerConnection(spec) as connection:
        if connection.state.status != "up":
            raise SystemExit(f"server {spec.name} did not come up: {connection.state.describe()}")
        for _ in range(max(5, calls // 20)):  # warm-up
            await connection.call("delay", {"ms": server_ms})
        for _ in range(calls):
            started = time.perf_counter()
            output = await connection.call("delay", {"ms": server_ms})
            wall = (time.perf_counter() - started) * 1000
            if output.is_error:
                raise SystemExit(f"call failed: {output.text}")
            overheads.append(wall - float(output.text))
    return overheads


async def main(full: bool) -> None:
    calls = 2000 if full else 300
    report = Report("mcp_calls", full=full)
    table = Table(title=f"MCP call overhead above the server's own time ({calls} calls each, ms)")
    for column in ("transport", "server time", "p50", "p99", "mean"):
        table.add_column(column, justify="right" if column != "transport" else "left")
    stdio = ServerSpec(name="bench", command=sys.executable, args=STDIO_ARGS, cwd=str(ROOT))
    async with http_server() as url:
        cases = {"stdio": stdio, "http": ServerSpec(name="bench", url=url)}
        for label, spec in cases.items():
            for server_ms in (0.0, 5.0):
                values = await measure(spec, calls, server_ms)
                p50, p99 = quantile(values, 0.5), quantile(values, 0.99)
                table.add_row(
                    label, f"{server_ms:g}", f"{p50:.3f}", f"{p99:.3f}", f"{statistics.mean(values):.3f}"
                )
                report.add(f"{label}/server {server_ms:g} ms/p50", p50)
                report.add(f"{label}/server {server_ms:g} ms/p99", p99)
    report.note("calls", calls)
    Console().print(table)
    report.save()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true")
    asyncio.run(main(parser.parse_args().full))
