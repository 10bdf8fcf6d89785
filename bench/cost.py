"""A month's cost, measured: a seeded replay of 30 days of traffic priced with the model table.

Three conversations at human pacing, on a virtual clock (nothing waits): a busy group (ambient
chatter all day, the bot addressed now and then, and bursts of quick exchanges), a DM with long
silences, and a tool-heavy session (every turn searches the conversation two to four times).
Each turn goes through the service's own code, hygiene first (``run_hygiene``) then the tool
loop (``AgentLoop`` with the ``ContextCompressor``), against the fake Messages API, whose prompt
cache expires entries after their TTL on the same virtual clock and looks back 20 blocks like the
API. Every call is priced by the model table (``agent.tokens.cost_usd``), summaries included.

Every chat call carries cache diagnostics (``agent.cache_diagnostics``): the calls whose prefix
missed are grouped by the reason (the API's, or ours where it names none: ``first_call``,
``expired``) and our own cause, with what the miss added to the bill: the call's cost less what it
would have cost had its cache writes been reads.

The caching policies: ``auto`` (ours: the TTL chosen from the users' observed gaps, the context
budget, compaction), ``5m``, ``1h`` and ``none``. ``auto`` also reports the API's automatic
caching mode (one top-level marker) under the same TTL choice.

    python bench/cost.py [--days 30] [--seed 7] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.table import Table

from agent.engines.compressor.engine import ContextCompressor
from agent.llm import AnthropicProvider
from agent.loop import AgentLoop
from agent.settings import CompressionSettings, LLMSettings, PromptCachingSettings
from agent.tokens import cost_usd
from agent.tools import default_registry
from agent.types import AgentSession, ChatMessage, UsageRecord
from gateway.serving.hygiene import run_hygiene

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fake servers live in tests/fakes
from _report import Report

from tests.fakes.anthropic import FakeAnthropic, Reply, is_summary_request, last_user_text, text_reply
from tests.fakes.memory_store import InMemoryStore

MODEL = "claude-sonnet-5-5"
SUMMARY_MODEL = "claude-haiku-5-5"
POLICIES: tuple[str, ...] = ("auto", "5m", "1h", "none")
KINDS = ("busy group", "dm", "tool-heavy")
START = datetime(2026, 11, 2, tzinfo=UTC)
SYSTEM = (
    "You are Hygieia, a helpful assistant in a long-lived chat. Messages from people arrive with a "
    "short header naming the author and time. Use session_search and recall when it matters. "
) * 8
WORDS = [
    "the",
    "meeting",
    "moved",
    "to",
    "thursday",
    "and",
    "nobody",
    "told",
    "the",
    "caterer",
    "so",
    "we",
    "have",
    "forty",
    "sandwiches",
    "and",
    "a",
    "cake",
    "shaped",
    "like",
    "a",
    "spreadsheet",
    "which",
    "honestly",
    "is",
    "the",
    "best",
    "outcome",
    "of",
    "this",
    "quarter",
    "did",
    "anyone",
    "see",
    "the",
    "train",
    "strike",
    "notice",
    "or",
    "the",
    "new",
    "parking",
    "rules",
    "by",
    "the",
    "station",
]


@dataclass(order=True)
class Event:
    """One thing that happens in a conversation at ``at``: a message for the bot, or chatter."""

    at: datetime
    kind: str = field(compare=False)
    addressed: bool = field(compare=False)
    text: str = field(compare=False)
    tool_rounds: int = field(default=0, compare=False)


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def traffic(seed: int, days: int) -> list[Event]:
    """Every event of the replay, in time order (the same seed gives the same month)."""
    rng = random.Random(seed)
    events: list[Event] = []
    for day in range(days):
        base = START + timedelta(days=day)
        # Busy group: chatter from 8:00 to midnight, a Poisson stream with lulls and two or three bursts.
        t = base + timedelta(hours=8, minutes=rng.uniform(0, 30))
        end = base + timedelta(hours=24)
        while t < end:
            addressed = rng.random() < 0.12
            events.append(Event(t, "busy group", addressed, _sentence(rng, 4, 30)))
            t += timedelta(seconds=rng.expovariate(1 / 240))
        for _ in range(rng.randint(2, 3)):
            t = base + timedelta(hours=rng.uniform(9, 22))
            for _ in range(rng.randint(8, 16)):
                events.append(Event(t, "busy group", True, _sentence(rng, 3, 18)))
                t += timedelta(seconds=rng.uniform(25, 100))
        # DM: a handful of messages hours apart, now and then a quick follow-up.
        t = base + timedelta(hours=rng.uniform(7, 10))
        for _ in range(rng.randint(4, 7)):
            events.append(Event(t, "dm", True, _sentence(rng, 8, 40)))
            if rng.random() < 0.3:
                events.append(
                    Event(t + timedelta(seconds=rng.uniform(60, 200)), "dm", True, _sentence(rng, 3, 12))
                )
            t += timedelta(hours=rng.uniform(1.5, 4))
        # Tool-heavy: two work sessions of steady questions, each answered after searches.
        for start_hour in (10, 15):
            t = base + timedelta(hours=start_hour, minutes=rng.uniform(0, 40))
            for _ in range(rng.randint(5, 8)):
                events.append(Event(t, "tool-heavy", True, _sentence(rng, 6, 24), rng.randint(2, 4)))
                t += timedelta(seconds=rng.uniform(90, 420))
    events.sort()
    return events


class VirtualClock:
    """The replay's time: moved forward by the replay, read by the cache, the loop and hygiene."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def seconds(self) -> float:
        return (self.now - START).total_seconds()


class Model:
    """The fake model's answers: text of a seeded length, or the event's searches first."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rounds: dict[str, int] = {}
        self.plans: dict[str, int] = {}
        self.uses: dict[str, int] = {}

    def plan(self, session_id: str, rounds: int) -> None:
        self.plans[session_id], self.rounds[session_id] = rounds, 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        if is_summary_request(body):
            return text_reply(
                "## Goal\n- keep the chat going\n## Key Facts\n- " + last_user_text(body)[-400:]
            )
        session_id = _session_of(body)
        done = self.rounds.get(session_id, 0)
        rng = random.Random(f"{self.seed}:{session_id}:{len(body['messages'])}")
        if done < self.plans.get(session_id, 0):
            self.rounds[session_id] = done + 1
            query = rng.choice(WORDS)
            # Unique like the API's: seeded by the view's length alone, a view grown back to a length
            # it had before a compaction repeated an id still in the transcript (refused, rightly).
            self.uses[session_id] = self.uses.get(session_id, 0) + 1
            use = {
                "type": "tool_use",
                "id": f"toolu_{rng.getrandbits(40):013d}{self.uses[session_id]:07d}",
                "name": "session_search",
            }
            return Reply([{**use, "input": {"query": query}}], "tool_use")
        return text_reply(_sentence(rng, 20, 140))


def _session_of(body: dict[str, Any]) -> str:
    """The conversation a request is for: its system prompt ends with the session's id."""
    return str(body["system"][0]["text"]).rsplit(" ", 1)[-1]


def _id(kind: str) -> str:
    return kind.replace(" ", "-")


@dataclass
class Totals:
    turns: int = 0
    calls: int = 0
    usd: float = 0.0
    prompt: int = 0
    cache_read: int = 0
    compactions: int = 0
    # "reason/cause" -> [missed calls, USD those calls cost, USD the misses added]
    misses: dict[str, list[float]] = field(default_factory=dict)

    def add_miss(self, label: str, calls: float, cost: float, extra: float) -> None:
        seen = self.misses.setdefault(label, [0.0, 0.0, 0.0])
        seen[0] += calls
        seen[1] += cost
        seen[2] += extra


def miss_extra(record: UsageRecord, before: int) -> float:
    """What a miss added to a call's cost: its cost less the same call with the part of its cache
    writes that the previous call's prompt (``before`` tokens) could have given read instead."""
    usage = record.usage
    readable = min(usage.cache_creation_input_tokens, before)
    hour = usage.cache_creation_1h_input_tokens
    hit = replace(
        usage,
        cache_read_input_tokens=usage.cache_read_input_tokens + readable,
        cache_creation_input_tokens=usage.cache_creation_input_tokens - readable,
        cache_creation_1h_input_tokens=None if hour is None else max(0, hour - readable),
    )
    return max(0.0, record.cost_usd - cost_usd(record.model, hit))


async def replay(
    events: list[Event], policy: str, seed: int, *, mode: Literal["breakpoints", "automatic"] = "breakpoints"
) -> dict[str, Totals]:
    """Run the month under one caching policy; the totals per conversation."""
    clock = VirtualClock()
    model = Model(seed)
    caching = PromptCachingSettings(
        enabled=policy != "none",
        cache_ttl="auto" if policy == "none" else policy,
        mode=mode,  # type: ignore[arg-type]
    )
    compression = CompressionSettings()
    async with FakeAnthropic(responder=model, clock=clock.seconds) as fake:
        fake.cache.lookback = 20
        fake.min_cacheable_tokens = 512
        provider = AnthropicProvider(
            api_key="bench", base_url=fake.base_url, settings=LLMSettings(max_retries=0)
        )
        store = InMemoryStore()
        engine = ContextCompressor(compression, provider, summary_model=SUMMARY_MODEL, clock=clock)
        loop = AgentLoop(provider, store, engine, caching=caching, tools=default_registry(), clock=clock)
        tools = loop.tools.definitions()
        sessions = {
            kind: AgentSession(
                _id(kind),
                f"{SYSTEM}Chat: {_id(kind)}",
                MODEL,
                1_000_000,
                key=kind,
                budget_tokens=compression.budget_tokens,
            )
            for kind in KINDS
        }
        totals = {kind: Totals() for kind in KINDS}
        try:
            for event in events:
                clock.now = event.at
                session = sessions[event.kind]
                message = ChatMessage.user(event.text, created_at=event.at)
                if not event.addressed:
                    await store.append_message(session.id, message)
                    continue
                await store.append_message(session.id, message)
                report = await run_hygiene(engine, store, session, compression, tools=tools, clock=clock)
                model.plan(session.id, event.tool_rounds)
                result = await loop.run_turn(session, report.messages, state=report.state)
                totals[event.kind].turns += 1
                totals[event.kind].compactions += len(result.compactions) + (report.status == "compacted")
        finally:
            await provider.aclose()
        for kind, session in sessions.items():
            before = 0  # the previous chat call's prompt: what a hit could have read
            for record in store.usage.get(session.id, []):
                usage = record.usage
                totals[kind].calls += 1
                totals[kind].usd += record.cost_usd
                totals[kind].prompt += usage.context_tokens
                totals[kind].cache_read += usage.cache_read_input_tokens
                check = record.cache
                if check is not None and check.reason is not None:
                    extra = miss_extra(record, before)
                    totals[kind].add_miss(f"{check.reason}/{check.cause}", 1, record.cost_usd, extra)
                if record.purpose == "chat":
                    before = usage.context_tokens
    return totals


def figures(totals: dict[str, Totals], days: int) -> dict[str, Any]:
    """Dollars per day and per 1k turns, and the share of prompt tokens read from cache."""
    out: dict[str, Any] = {}
    whole = Totals()
    for kind, t in totals.items():
        out[kind] = _row(t, days)
        whole.turns += t.turns
        whole.calls += t.calls
        whole.usd += t.usd
        whole.prompt += t.prompt
        whole.cache_read += t.cache_read
        whole.compactions += t.compactions
        for label, (calls, cost, extra) in t.misses.items():
            whole.add_miss(label, calls, cost, extra)
    out["all"] = _row(whole, days)
    return out


def _row(t: Totals, days: int) -> dict[str, Any]:
    return {
        # Per miss label: calls, the share of the bill those calls were, and the share the misses
        # added (their cost less the same calls reading what the previous call's prompt held).
        "misses": {
            label: {
                "calls": int(calls),
                "bill_share": round(cost / t.usd, 4) if t.usd else 0.0,
                "added_share": round(extra / t.usd, 4) if t.usd else 0.0,
            }
            for label, (calls, cost, extra) in sorted(t.misses.items(), key=lambda kv: -kv[1][2])
        },
        "usd_per_day": round(t.usd / days, 4),
        "usd_per_1k_turns": round(1000 * t.usd / t.turns, 3) if t.turns else 0.0,
        "cache_read_share": round(t.cache_read / t.prompt, 4) if t.prompt else 0.0,
        "turns": t.turns,
        "calls": t.calls,
        "compactions": t.compactions,
    }


ReplayJob = tuple[list[Event], str, int, Literal["breakpoints", "automatic"]]


def replay_alone(job: ReplayJob) -> dict[str, Totals]:
    """One replay in an event loop of its own (a process of the pool, or this one)."""
    events, policy, seed, mode = job
    return asyncio.run(replay(events, policy, seed, mode=mode))


def measure(seed: int, days: int, *, processes: int = 1) -> dict[str, Any]:
    """Every policy's figures for one seeded month (keys exactly ``auto``, ``5m``, ``1h``, ``none``).

    The replays share nothing (each has its own virtual clock and fake API), so ``processes`` > 1
    runs them side by side, one process each, with the same figures."""
    events = traffic(seed, days)
    jobs: list[ReplayJob] = [(events, policy, seed, "breakpoints") for policy in POLICIES]
    jobs.append((events, "auto", seed, "automatic"))
    if processes > 1:
        spawn = multiprocessing.get_context("spawn")  # no fork of a process holding sockets and loops
        with ProcessPoolExecutor(min(processes, len(jobs)), mp_context=spawn) as pool:
            done = list(pool.map(replay_alone, jobs))
    else:
        done = [replay_alone(job) for job in jobs]
    results: dict[str, Any] = {
        policy: figures(totals, days) for policy, totals in zip(POLICIES, done, strict=False)
    }
    results["auto"]["automatic_mode"] = figures(done[-1], days)
    return results


def miss_table(results: dict[str, Any], days: int, seed: int) -> Table:
    """The misses that remain, per policy and conversation: reason/cause, calls, bill share."""
    table = Table(
        title=f"cache misses over {days} days (seed {seed}): reason/cause calls "
        "(those calls' share of the bill / what the misses added to it)"
    )
    for column in ("policy", "conversation", "misses"):
        table.add_column(column, justify="right" if column != "misses" else "left")
    for policy in POLICIES:
        for kind in (*KINDS, "all"):
            misses = results[policy][kind]["misses"]
            text = "; ".join(
                f"{label} {m['calls']} ({100 * m['bill_share']:.1f}% / {100 * m['added_share']:.1f}%)"
                for label, m in misses.items()
            )
            table.add_row(policy, kind, text or "none")
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the full 30 days (the default is 7)")
    parser.add_argument("--days", type=int, default=None)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on stdout")
    parser.add_argument(
        "--processes", type=int, default=os.cpu_count() or 1, help="replays at once (default: cores)"
    )
    args = parser.parse_args()
    days = args.days or (30 if args.full else 7)
    results = measure(args.seed, days, processes=args.processes)
    console = Console(stderr=args.json)
    table = Table(title=f"cost of {days} days on {MODEL} (seed {args.seed})")
    for column in ("policy", "conversation", "$/day", "$/1k turns", "cache-read share", "vs none"):
        table.add_column(column, justify="right")
    for policy in (*POLICIES, "api automatic"):
        rows = results["auto"]["automatic_mode"] if policy == "api automatic" else results[policy]
        for kind in (*KINDS, "all"):
            row, base = rows[kind], results["none"][kind]
            ratio = row["usd_per_day"] / base["usd_per_day"] if base["usd_per_day"] else 0.0
            table.add_row(
                policy,
                kind,
                f"{row['usd_per_day']:.3f}",
                f"{row['usd_per_1k_turns']:.2f}",
                f"{100 * row['cache_read_share']:.1f}%",
                f"{ratio:.2f}x",
            )
    console.print(table)
    console.print(miss_table(results, days, args.seed))
    report = Report("cost", full=days >= 30)
    for policy in POLICIES:
        for kind in (*KINDS, "all"):
            report.add(f"{policy}/{kind}/usd per day", results[policy][kind]["usd_per_day"], unit="USD")
    report.note("days", days)
    report.note("seed", args.seed)
    report.note("policies", results)
    report.save()
    if args.json:
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
