"""How many facts kept only in memory notes survive 50 compactions, with the memory flush on.

The real compressor with the memory flush (``agent.memory_flush``) as its pre_compact hook, the
real SDK against the fake Messages API, the in-memory store. 20 facts are planted only in a note
(never said in the conversation). Each round adds exchanges that carry one new fact, then compacts
(trigger ``manual``, a real summary each time). The fake model's flush turn is adversarial: it
first tries to overwrite the note with only the new fact (``create``), then to delete it, and only
then appends the new fact (``insert``). Counted at the end: planted facts still in the note,
conversation facts saved to it, and whether the last summary's memory index names the note.

    python bench/notes_survival.py [--full] [--rounds 50]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fake servers live in tests/fakes
from _report import Report

from agent.compaction import compact
from agent.engines.compressor.engine import ContextCompressor
from agent.engines.hooks import CompactHooks
from agent.llm import AnthropicProvider
from agent.memory_flush import FLUSH_SYSTEM, MemoryFlush
from agent.settings import CompressionSettings, LLMSettings
from agent.types import AgentSession, ChatMessage
from tests.fakes.anthropic import (
    Answer,
    FakeAnthropic,
    is_summary_request,
    last_user_text,
    summary_text,
    text_reply,
    tool_use_reply,
)
from tests.fakes.memory_store import InMemoryStore

SCOPE = "bench:chat"
NOTE = "/memories/facts.md"
PLANTED = [f"- planted fact {i}: the code for locker {i} is {1000 + i * 37}" for i in range(20)]
FILLER = "we talked about the weather, the garden and the week ahead at some length. " * 6


def flush_answer(body: dict[str, Any]) -> Answer:
    """Overwrite, then delete, then append the new facts of the range (the first two are refused)."""
    made = sum(1 for m in body["messages"] if m["role"] == "assistant")
    facts = re.findall(r"new fact (\d+) is [a-z]+", str(body["messages"][0]))
    lines = "\n".join(f"- conversation fact {n}" for n in sorted(set(facts), key=int))
    if not facts or made >= 3:
        return text_reply("saved")
    steps = [
        {"command": "create", "path": NOTE, "file_text": lines + "\n"},
        {"command": "delete", "path": NOTE},
        {"command": "insert", "path": NOTE, "insert_line": 0, "insert_text": lines},
    ]
    return tool_use_reply("memory", steps[made])


async def responder(body: dict[str, Any]) -> Answer:
    system = " ".join(str(b.get("text", "")) for b in body.get("system") or [])
    if FLUSH_SYSTEM in system:
        return flush_answer(body)
    if is_summary_request(body):
        return text_reply(summary_text(last_user_text(body)[-200:]))
    return text_reply("ok")


async def run(rounds: int) -> dict[str, Any]:
    store = InMemoryStore()
    await store.memory_put(SCOPE, NOTE, "\n".join(PLANTED) + "\n")
    session = AgentSession("s1", "You are a test assistant.", "claude-sonnet-4-6", 20_000, key=SCOPE)
    settings = CompressionSettings()
    async with FakeAnthropic(context_window=20_000, responder=responder) as fake:
        provider = AnthropicProvider(
            api_key="bench", base_url=fake.base_url, settings=LLMSettings(max_retries=0)
        )
        try:
            engine = ContextCompressor(settings, provider, summary_model="claude-haiku-4-5")
            engine.hooks = CompactHooks(pre=[MemoryFlush(provider, store, settings).as_hook()])
            compactions = 0
            for r in range(rounds):
                for i in range(12):
                    fact = f" The new fact {r} is {'abcdefghij'[r % 10]}xyz." if i == 0 else ""
                    await store.append_message(
                        session.id, ChatMessage.user(f"round {r} message {i}.{fact} {FILLER}")
                    )
                    await store.append_message(session.id, ChatMessage.assistant(f"noted {r}.{i}. {FILLER}"))
                result = await compact(engine, store, session, trigger="manual")
                compactions += result.record is not None
            note = await store.memory_get(SCOPE, NOTE)
            text = note.content if note is not None else ""
            active = await store.load_active(session.id)
            summary = next((m.text for m in reversed(active) if m.kind == "summary"), "")
        finally:
            await provider.aclose()
    return {
        "compactions": compactions,
        "planted_survived": sum(1 for line in PLANTED if line in text),
        "conversation_facts_saved": len(set(re.findall(r"conversation fact (\d+)", text))),
        "index_names_note": NOTE in summary,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    rounds = args.rounds or (50 if args.full else 10)
    found = asyncio.run(run(rounds))
    print(
        f"{found['compactions']} compactions: "
        f"planted facts in the note {found['planted_survived']}/{len(PLANTED)}, "
        f"conversation facts saved {found['conversation_facts_saved']}/{rounds}, "
        f"memory index in the last summary names the note: {found['index_names_note']}"
    )
    report = Report("notes_survival", full=args.full)
    report.add("planted facts surviving", found["planted_survived"], unit="facts", better="higher")
    report.add("conversation facts saved", found["conversation_facts_saved"], unit="facts", better="higher")
    report.note("compactions", found["compactions"])
    report.save()


if __name__ == "__main__":
    main()
