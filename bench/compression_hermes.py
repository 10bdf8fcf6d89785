"""Compression, non-LLM phases, side by side with Hermes Agent's context compressor.

The same seeded transcripts (100 / 500 / 2,000 messages of a coding-agent conversation with
realistic tool outputs, ``_transcripts.py``) go through our ``ContextCompressor.compress`` and
through Hermes Agent's ``ContextCompressor.compress``, each with its summary model replaced by a
zero-latency stub that returns the same text (inside this bench only). What is timed is
everything else: sizes, boundaries, pruning, the summarizer's input (serialization, redaction),
the assembly of the new view and its checks.

Hermes runs in ITS OWN virtual environment, in a subprocess (its top-level packages are also
named ``agent`` and ``gateway``): ``$HYGIEIA_HERMES_PYTHON``, default
``/work/hermes-venv/bin/python`` (``python3 -m venv /work/hermes-venv &&
/work/hermes-venv/bin/pip install 'hermes-agent==0.19.*'``). Without it the Hermes column is
skipped with one line.

    python bench/compression_hermes.py [--full] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _report import Report
from _transcripts import to_openai, transcript
from rich.console import Console
from rich.table import Table

from agent.engines.compressor.engine import ContextCompressor
from agent.provider import LLMRequest, LLMResponse
from agent.settings import CompressionSettings
from agent.types import AgentSession, ChatMessage, ContextState, Usage, text_block

HERMES_ENV = "HYGIEIA_HERMES_PYTHON"
HERMES_DEFAULT = "/work/hermes-venv/bin/python"
MODEL = "claude-sonnet-4-6"
WINDOW = 200_000
SIZES = (100, 500, 2_000)
# What both stubs answer: a plausible structured summary of about 300 tokens.
SUMMARY = "\n".join(
    f"## {name}\n- " + "the deploy worker retried the outbox and the tests pass now " * 3
    for name in ("Goal", "Constraints & Preferences", "Progress", "Key Decisions", "Remaining Work")
)


class StubSummarizer:
    """An LLM provider that answers every request at once with :data:`SUMMARY` (bench only)."""

    name = "stub"

    async def create(self, request: LLMRequest) -> LLMResponse:
        return LLMResponse([text_block(SUMMARY)], "end_turn", Usage(1000, 300), request.model, billed=False)

    async def count_tokens(self, request: LLMRequest) -> int | None:
        return None

    async def aclose(self) -> None:
        return None


async def ours(messages: list[ChatMessage], repeats: int) -> tuple[list[float], list[float], int]:
    """Wall and CPU (this thread's) milliseconds of each run, and how many messages it archived."""
    session = AgentSession(id="bench", system_prompt="You are a bench.", model=MODEL, context_window=WINDOW)
    engine = ContextCompressor(CompressionSettings(), StubSummarizer(), summary_model="claude-haiku-4-5")
    timings: list[float] = []
    cpu: list[float] = []
    archived = 0
    for _ in range(repeats):
        # Fresh message objects each run, as a fresh load of the active view would give.
        fresh = [m.with_content(list(m.content)) for m in messages]
        started, started_cpu = time.perf_counter(), time.thread_time()
        outcome = await engine.compress(session, fresh, ContextState(), trigger="manual")
        cpu.append((time.thread_time() - started_cpu) * 1000)
        timings.append((time.perf_counter() - started) * 1000)
        if outcome.plan is None:
            raise SystemExit(f"our compressor did not compact {len(messages)} messages: {outcome.reason}")
        archived = len(outcome.plan.archive_ids)
    return timings, cpu, archived


def hermes(python: str, size: int, messages: list[ChatMessage], repeats: int) -> dict[str, Any]:
    job = {
        "window": WINDOW,
        "model": MODEL,
        "repeats": repeats,
        "summary": SUMMARY,
        "cases": [{"name": str(size), "messages": to_openai(messages)}],
    }
    driver = Path(__file__).with_name("_hermes_driver.py")
    with tempfile.TemporaryDirectory(prefix="hermes-home-") as home:
        # -I: isolated (no cwd, no PYTHONPATH), so our own `agent` can never shadow Hermes' one;
        # a throw-away HOME keeps Hermes from reading or writing the user's ~/.hermes.
        done = subprocess.run(
            [python, "-I", str(driver)],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            env={"HOME": home, "PATH": os.environ.get("PATH", ""), "HERMES_HOME": f"{home}/.hermes"},
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"the Hermes driver failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="more repeats")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON too")
    args = parser.parse_args()
    repeats = 7 if args.full else 4
    rounds = 3 if args.full else 2  # ours and Hermes take turns: a load spike hits both alike
    cases = {size: transcript(size) for size in SIZES}
    asyncio.run(ours(cases[100], 2))  # warm-up: imports, regex compilation
    report = Report("compression_hermes", full=args.full)
    python = os.environ.get(HERMES_ENV, HERMES_DEFAULT)
    present = Path(python).exists()
    if not present:
        print(f"Hermes Agent: skipped ({python} not found; set {HERMES_ENV})")
    version = "absent"
    table = Table(title=f"Compression, non-LLM phases (summary stubbed), {WINDOW:,}-token window")
    columns = ("messages", "tokens", "ours CPU ms", "Hermes CPU ms", "ours / Hermes", "wall: ours / Hermes")
    for column in columns:
        table.add_column(column, justify="right")
    rows: dict[str, Any] = {}
    for size, messages in cases.items():
        mine: dict[str, list[float]] = {"ms": [], "cpu_ms": []}
        theirs: dict[str, list[float]] = {"ms": [], "cpu_ms": []}
        archived = 0
        for _ in range(rounds):
            wall, cpu, archived = asyncio.run(ours(messages, repeats))
            mine["ms"] += wall
            mine["cpu_ms"] += cpu
            if present:
                result = hermes(python, size, messages, repeats)
                version = result["version"]
                for key in theirs:
                    theirs[key] += result["cases"][str(size)][key]
        ms = {key: statistics.median(values) for key, values in mine.items()}
        report.add(f"{size}/ours", ms["cpu_ms"])
        report.add(f"{size}/ours wall", ms["ms"])
        row: dict[str, Any] = {"ours_cpu_ms": ms["cpu_ms"], "ours_ms": ms["ms"], "archived": archived}
        cells = [f"{ms['cpu_ms']:.1f}", "-", "-", "-"]
        if theirs["ms"]:
            their = {key: statistics.median(values) for key, values in theirs.items()}
            ratio, wall_ratio = ms["cpu_ms"] / their["cpu_ms"], ms["ms"] / their["ms"]
            report.add(f"{size}/hermes", their["cpu_ms"])
            report.add(f"{size}/ratio", ratio, unit="x")
            row.update(
                hermes_cpu_ms=their["cpu_ms"], hermes_ms=their["ms"], ratio=ratio, wall_ratio=wall_ratio
            )
            cells = [f"{ms['cpu_ms']:.1f}", f"{their['cpu_ms']:.1f}", f"{ratio:.2f}x", f"{wall_ratio:.2f}x"]
        rows[str(size)] = row
        tokens = sum(len(m.text) for m in messages) // 4
        table.add_row(str(size), f"~{tokens:,}", *cells)
    table.caption = (
        f"Hermes Agent {version}; median of {rounds} x {repeats} runs each side, interleaved; CPU time of"
        " the compressing thread (a loaded machine stretches wall time, not this)"
    )
    load = os.getloadavg()
    report.note("hermes", version)
    report.note("loadavg", [round(x, 2) for x in load])
    report.save()
    console = Console(width=140)
    console.print(table)
    loads = " ".join(f"{x:.2f}" for x in load)
    print(f"load average {loads} on {os.cpu_count()} cpus")
    if args.json:
        print(json.dumps({"hermes": version, "rows": rows, "loadavg": load}), file=sys.stdout)


if __name__ == "__main__":
    main()
