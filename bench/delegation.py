"""What a delegated expensive read costs the conversation, against doing the read in it.

One chat turn asks about N files of ~12 KB each. ``in conversation``: the chat's model calls
``read_file`` N times itself, then answers. ``delegated``: it calls ``delegate`` once; the
sub-agent (a fresh context) reads the N files and answers in one short paragraph, which comes
back with its trailer. Through the real loop and the real SDK against the fake Anthropic server
(which counts tokens deterministically), on the in-memory store. Measured: the tokens the chat's
NEXT request carries (its context after the turn), what the turn added to it, and the tokens
every call of the turn consumed (input + output, the sub-agent's included). Reduced: 4 files;
``--full``: 12.

    python bench/delegation.py [--full]
"""

from __future__ import annotations

import argparse
import asyncio
from collections import deque
from typing import Any

import _root  # noqa: F401  (the checkout on sys.path, for tests.fakes)
from _report import Report
from rich.console import Console
from rich.table import Table

from agent.engines.compressor.engine import ContextCompressor
from agent.llm import AnthropicProvider
from agent.loop import AgentLoop
from agent.prompts import SUBAGENT_SYSTEM
from agent.settings import DEFAULT_SUMMARY_MODEL, CompressionSettings, LLMSettings, PromptCachingSettings
from agent.tools import FunctionTool, ToolContext, default_registry
from agent.tools.delegate import DelegateTool, DelegationLimits, SubAgentParts
from agent.types import AgentSession, ChatMessage
from tests.fakes.anthropic import Answer, FakeAnthropic, text_reply, tool_use_reply
from tests.fakes.memory_store import InMemoryStore

MODEL = "claude-sonnet-4-6"
ANSWER = "All files agree: the launch code is 7731, owned by the ops team; file 3 adds a backup code 9902."


async def read_file(ctx: ToolContext, tool_input: dict[str, Any]) -> str:
    path = str(tool_input["path"])
    return "\n".join(
        f"{path}:{n:4d} lorem ipsum dolor sit amet, consectetur adipiscing elit" for n in range(170)
    )


class Script:
    def __init__(self, files: int, delegated: bool) -> None:
        reads = [tool_use_reply("read_file", {"path": f"/docs/{i}.txt"}) for i in range(files)]
        self.chat: deque[Answer] = deque()
        self.sub: deque[Answer] = deque()
        if delegated:
            self.chat.extend([tool_use_reply("delegate", {"task": f"Read /docs/0..{files - 1}.txt"})])
            self.sub.extend([*reads, text_reply(ANSWER)])
        else:
            self.chat.extend([*reads])
        self.chat.append(text_reply(ANSWER))
        self.chat_bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Answer:
        if SUBAGENT_SYSTEM[:40] in str(body.get("system")):
            return self.sub.popleft() if self.sub else text_reply(ANSWER)
        self.chat_bodies.append(body)
        return self.chat.popleft() if self.chat else text_reply("ok")


async def run(files: int, delegated: bool) -> dict[str, int]:
    script = Script(files, delegated)
    llm = LLMSettings(max_retries=0, max_tool_iterations=files + 4)
    async with FakeAnthropic(responder=script) as fake:
        provider = AnthropicProvider(api_key="bench", base_url=fake.base_url, settings=llm)
        try:
            store = InMemoryStore()
            store.add_session("s1", platform="bench", chat_id="1")
            engine = ContextCompressor(CompressionSettings(), provider, summary_model=DEFAULT_SUMMARY_MODEL)
            tools = default_registry()
            schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
            tools.register(FunctionTool("read_file", "Read a file.", schema, read_file))
            caching = PromptCachingSettings()
            # Limits out of the way: the bench measures the read, not where a budget cuts it.
            limits = DelegationLimits(max_turns=files + 4, max_tokens=10_000_000)
            tools.register(DelegateTool(SubAgentParts(provider, engine, tools, llm, caching), limits))
            loop = AgentLoop(provider, store, engine, llm=llm, caching=caching, tools=tools)
            session = AgentSession("s1", "You help.", MODEL, 200_000, key="bench:1", platform="bench")
            await loop.run_turn(session, message=ChatMessage.user("what do the docs say?"))
            before = fake.count_tokens(script.chat_bodies[0])
            await loop.run_turn(session, message=ChatMessage.user("thanks"))
            after = fake.count_tokens(script.chat_bodies[-1])
            spent = sum(
                u["input_tokens"]
                + u["cache_creation_input_tokens"]
                + u["cache_read_input_tokens"]
                + u["output_tokens"]
                for u in fake.usages[:-1]
            )
            assert ANSWER in str(script.chat_bodies[-1]["messages"]), "the answer did not reach the chat"
            return {"next_request": after, "growth": after - before, "turn_tokens": spent}
        finally:
            await provider.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true")
    args = parser.parse_args()
    files = 12 if args.full else 4
    report = Report("delegation", full=args.full)
    report.note("files", files)
    table = Table(title=f"an expensive read of {files} files (~12 KB each): the chat's context")
    for column in ("how", "next chat request", "growth of the chat", "tokens of the turn (all calls)"):
        table.add_column(column, justify="right" if column != "how" else "left")
    results = {}
    for name, delegated in (("in conversation", False), ("delegated", True)):
        r = asyncio.run(run(files, delegated))
        results[name] = r
        table.add_row(name, f"{r['next_request']:,}", f"{r['growth']:,}", f"{r['turn_tokens']:,}")
        key = name.replace(" ", "_")
        report.add(f"{key}/next request", r["next_request"], unit="tokens")
        report.add(f"{key}/growth", r["growth"], unit="tokens")
        report.add(f"{key}/turn tokens", r["turn_tokens"], unit="tokens")
    Console().print(table)
    ratio = results["in conversation"]["growth"] / max(1, results["delegated"]["growth"])
    Console().print(f"the delegated read grows the chat {ratio:.0f}x less")
    report.save()


if __name__ == "__main__":
    main()
