"""The "Done means" run: a long scripted conversation with tool rounds in a small window.

Each turn: a user message, sometimes one or two tool rounds with a few KB of output, then an
answer. With a 20k-token window the loop must compact as it goes, every request must be
accepted by the fake (no 400), and nothing said may become unreachable. Reduced by default;
the full 300 turns run with ``-m full``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent.tools import FunctionTool, ToolContext, default_registry
from agent.transcript import validate_messages
from agent.types import SearchFilters
from tests.agent.loop_support import rig
from tests.fakes.anthropic import text_reply, tool_use_reply

WINDOW = 20_000
WORDS = [
    "deploy",
    "cache",
    "river",
    "lantern",
    "orbit",
    "maple",
    "quartz",
    "signal",
    "harbor",
    "velvet",
    "copper",
    "meadow",
    "cipher",
    "falcon",
    "ember",
    "glacier",
    "pixel",
    "tundra",
    "summit",
    "ledger",
    "prism",
    "anchor",
    "beacon",
    "thistle",
]
SECRET = "kumquat"


def sentence(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words)


async def fetch(ctx: ToolContext, tool_input: dict[str, Any]) -> str:
    """A deployer's tool: a few KB of deterministic 'file' content."""
    rng = random.Random(str(tool_input.get("path")))
    return "\n".join(f"{n:4d}  {sentence(rng, 70)}" for n in range(rng.randint(30, 70)))


@dataclass
class RunStats:
    turns: int = 0
    tool_rounds: int = 0
    chat_calls: int = 0
    max_request_tokens: int = 0
    compactions: list[tuple[str, int, int]] = field(default_factory=list)

    def line(self) -> str:
        by_trigger: dict[str, int] = {}
        for trigger, _, _ in self.compactions:
            by_trigger[trigger] = by_trigger.get(trigger, 0) + 1
        pairs = ", ".join(f"{before}->{after}" for _, before, after in self.compactions)
        return (
            f"turns={self.turns} tool_rounds={self.tool_rounds} chat_calls={self.chat_calls} "
            f"max_request_tokens={self.max_request_tokens}/{WINDOW} compactions={by_trigger} "
            f"tokens_before->after=[{pairs}]"
        )


async def run_conversation(turns: int, seed: int) -> RunStats:
    rng = random.Random(seed)
    tools = default_registry()
    tools.register(
        FunctionTool(
            "fetch",
            "Read a file.",
            {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
            fetch,
        )
    )
    stats = RunStats()
    async with rig(context_window=WINDOW, tools=tools) as r:
        for t in range(turns):
            text = f"turn {t}: " + sentence(rng, rng.randint(80, 600))
            if t == 0:
                text += f" (remember: the password is {SECRET})"
            rounds = rng.choices([0, 1, 2], weights=[5, 4, 1])[0]
            for k in range(rounds):
                if rng.random() < 0.8:
                    r.script.add(tool_use_reply("fetch", {"path": f"/srv/t{t}-{k}.txt"}))
                else:
                    r.script.add(tool_use_reply("session_search", {"query": rng.choice(WORDS)}))
            r.script.add(text_reply(f"answer {t}: " + sentence(rng, rng.randint(100, 900))))
            result = await r.turn(text)
            assert result.stopped == "end_turn", result.stopped
            stats.turns += 1
            stats.tool_rounds += rounds
            stats.compactions += [(c.trigger, c.tokens_before, c.tokens_after) for c in result.compactions]

        assert r.fake.counts["errors"] == 0, "the fake rejected a request"
        bodies = r.script.chat_bodies
        stats.chat_calls = len(bodies)
        stats.max_request_tokens = max(r.fake.count_tokens(b) for b in bodies)
        assert stats.max_request_tokens <= WINDOW
        assert validate_messages(await r.stored()) == []
        # Nothing said is lost: the first turn's detail is still found, archived.
        hits = await r.store.search(SECRET, SearchFilters(session_id=r.session.id))
        assert hits and all(h.session_id == r.session.id for h in hits)
    return stats


async def test_sixty_turns_in_a_small_window_never_overflow() -> None:
    stats = await run_conversation(60, seed=7)
    print(stats.line())
    assert stats.compactions, "a 20k window must have needed compaction"


@pytest.mark.full
async def test_three_hundred_turns_in_a_small_window_never_overflow() -> None:
    stats = await run_conversation(300, seed=300)
    print(stats.line())
    assert stats.compactions
