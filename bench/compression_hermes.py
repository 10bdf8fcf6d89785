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

from agent.compressor import ContextCompressor
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


async def ours(messages: list[ChatMessage], repeats: int) -> tuple[list[float], int]:
    session = AgentSession(id="bench", system_prompt="You are a bench.", model=MODEL, context_window=WINDOW)
    engine = ContextCompressor(CompressionSettings(), StubSummarizer(), summary_model="claude-haiku-4-5")
    timings: list[float] = []
    archived = 0
    for _ in range(repeats):
        # Fresh message objects each run, as a fresh load of the active view would give.
        fresh = [m.with_content(list(m.content)) for m in messages]
        started = time.perf_counter()
        outcome = await engine.compress(session, fresh, ContextState(), trigger="manual")
        timings.append((time.perf_counter() - started) * 1000)
        if outcome.plan is None:
            raise SystemExit(f"our compressor did not compact {len(messages)} messages: {outcome.reason}")
        archived = len(outcome.plan.archive_ids)
    return timings, archived


def hermes(python: str, cases: dict[int, list[ChatMessage]], repeats: int) -> dict[str, Any]:
    job = {
        "window": WINDOW,
        "model": MODEL,
        "repeats": repeats,
        "summary": SUMMARY,
        "cases": [{"name": str(size), "messages": to_openai(ms)} for size, ms in cases.items()],
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
    repeats = 15 if args.full else 5
    cases = {size: transcript(size) for size in SIZES}
    asyncio.run(ours(cases[100], 2))  # warm-up: imports, regex compilation
    report = Report("compression_hermes", full=args.full)
    python = os.environ.get(HERMES_ENV, HERMES_DEFAULT)
    theirs: dict[str, Any] | None = None
    if Path(python).exists():
        theirs = hermes(python, cases, repeats)
    else:
        print(f"Hermes Agent: skipped ({python} not found; set {HERMES_ENV})")

    version = theirs["version"] if theirs else "absent"
    table = Table(title=f"Compression, non-LLM phases (summary stubbed), {WINDOW:,}-token window")
    for column in ("messages", "tokens", "ours ms", f"Hermes {version} ms", "ours / Hermes"):
        table.add_column(column, justify="right")
    rows: dict[str, Any] = {}
    for size, messages in cases.items():
        timings, archived = asyncio.run(ours(messages, repeats))
        ms = statistics.median(timings)
        report.add(f"{size}/ours", ms)
        row: dict[str, Any] = {"ours_ms": ms, "archived": archived}
        cells = [f"{ms:.1f}", "-", "-"]
        if theirs:
            their_ms = statistics.median(theirs["cases"][str(size)]["ms"])
            report.add(f"{size}/hermes", their_ms)
            report.add(f"{size}/ratio", ms / their_ms, unit="x")
            row.update(hermes_ms=their_ms, ratio=ms / their_ms)
            cells = [f"{ms:.1f}", f"{their_ms:.1f}", f"{ms / their_ms:.2f}x"]
        rows[str(size)] = row
        tokens = sum(len(m.text) for m in messages) // 4
        table.add_row(str(size), f"~{tokens:,}", *cells)
    load = os.getloadavg()
    report.note("hermes", version)
    report.note("loadavg", [round(x, 2) for x in load])
    report.save()
    console = Console(width=140)
    console.print(table)
    loads = " ".join(f"{x:.2f}" for x in load)
    print(f"median of {repeats} runs each; load average {loads} on {os.cpu_count()} cpus")
    if args.json:
        print(json.dumps({"hermes": version, "rows": rows, "loadavg": load}), file=sys.stdout)


if __name__ == "__main__":
    main()
