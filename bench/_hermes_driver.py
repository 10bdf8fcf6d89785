"""Runs Hermes Agent's context compressor on transcripts; executed by ``compression_hermes.py``
with Hermes' OWN interpreter (its top-level packages are also called ``agent`` and ``gateway``,
so it never shares a process with ours). Imports nothing of this repository.

stdin: {"window", "model", "repeats", "summary", "cases": [{"name", "messages": [OpenAI chat messages]}]}
stdout: {"version", "cases": {name: {"ms": [...], "cpu_ms": [...], "messages_in", "messages_out"}}}

The summary model is replaced by a zero-latency stub (``call_llm`` answers at once with the
given text), so what is timed is everything ``ContextCompressor.compress`` does around it.
"""

from __future__ import annotations

import copy
import json
import logging
import sys
import time
from importlib import metadata
from types import SimpleNamespace
from typing import Any


def main() -> None:
    job = json.load(sys.stdin)
    logging.disable(logging.CRITICAL)
    import agent.context_compressor as hermes  # Hermes' package, from its own venv

    summary = job["summary"]

    def stub_call_llm(**_: Any) -> Any:
        message = SimpleNamespace(content=summary, tool_calls=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")])

    hermes.call_llm = stub_call_llm  # the module looked it up by name at import: patch it there
    out: dict[str, Any] = {}
    for case in job["cases"]:
        timings, cpu = [], []
        result: list[dict[str, Any]] = []
        for _ in range(job["repeats"]):
            compressor = hermes.ContextCompressor(
                job["model"], config_context_length=job["window"], quiet_mode=True, provider="anthropic"
            )
            messages = copy.deepcopy(case["messages"])  # the caller's list is never shared across runs
            started, started_cpu = time.perf_counter(), time.thread_time()
            result = compressor.compress(messages, force=True)
            cpu.append((time.thread_time() - started_cpu) * 1000)
            timings.append((time.perf_counter() - started) * 1000)
        out[case["name"]] = {
            "ms": timings,
            "cpu_ms": cpu,
            "messages_in": len(case["messages"]),
            "messages_out": len(result),
            "summarized": any(m.get(hermes.COMPRESSED_SUMMARY_METADATA_KEY) for m in result),
        }
    json.dump({"version": metadata.version("hermes-agent"), "cases": out}, sys.stdout)


if __name__ == "__main__":
    main()
