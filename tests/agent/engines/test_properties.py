"""Whatever mix of strategies runs, in whatever order, the active view stays valid for the API
and every archived row stays searchable and recallable."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace

from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from agent.compaction import compact, forget
from agent.engines.compressor.pipeline import CostOrderedCompressor
from agent.engines.sliding import SlidingEngine
from agent.engines.strategies.snip import SnipRefused
from agent.settings import CompressionSettings
from agent.transcript import validate_messages
from agent.types import AgentSession, ChatMessage, SearchFilters, Trigger, text_block
from tests.agent.conftest import ScriptedSummarizer, persist, transcripts
from tests.fakes.memory_store import InMemoryStore

STRATEGIES = ["snip", "cold_prune", "prune", "summary", "reactive"]
TRIGGERS: list[Trigger] = ["in_loop", "hygiene", "manual", "reactive", "scheduled"]

operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("compact"), st.sampled_from(TRIGGERS), st.permutations(STRATEGIES), st.integers(1, 5)
        ),
        st.tuples(st.just("forget"), st.integers(1, 3)),
        st.tuples(st.just("sliding"), st.sampled_from(TRIGGERS)),
    ),
    min_size=1,
    max_size=5,
)


def marked(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Each message a person wrote gets a word of its own, to search it by once it is archived."""
    out = []
    for i, m in enumerate(messages):
        if m.role == "user" and not m.tool_result_ids():
            m = m.with_content([text_block(f"zqmark{i} " + m.text)])
        out.append(m)
    return out


async def run(messages: list[ChatMessage], ops: list[tuple[object, ...]]) -> None:
    session = AgentSession(id="p1", system_prompt="sys", model="claude-sonnet-4-6", context_window=6_000)
    store = InMemoryStore()
    store.add_session("p1", platform="test", chat_id="c")
    await persist(store, "p1", marked(messages))
    valid_before = not validate_messages(await store.load_active("p1"))
    for op in ops:
        if op[0] == "compact":
            _, trigger, order, keep = op
            settings = CompressionSettings(protect_last_n=int(keep), strategies=list(order))  # type: ignore[call-overload]
            engine = CostOrderedCompressor(settings, ScriptedSummarizer(), summary_model="claude-haiku-4-5")
            await compact(engine, store, session, trigger=trigger)  # type: ignore[arg-type]
        elif op[0] == "forget":
            engine = CostOrderedCompressor(CompressionSettings(), ScriptedSummarizer(), summary_model="m")
            with contextlib.suppress(SnipRefused):
                await forget(engine, store, session, last=int(op[1]))  # type: ignore[call-overload]
        else:
            await compact(SlidingEngine(CompressionSettings()), store, session, trigger=op[1])  # type: ignore[arg-type]
        active = await store.load_active("p1")
        if valid_before:
            assert validate_messages(active) == [], op
        for row in store.all_messages("p1"):
            if not row.compacted:
                continue
            assert row.compaction_id is not None
            page = await store.recall("p1", compaction_id=row.compaction_id, limit=10_000)
            assert row.id in {m.id for m in page.messages}
            word = next((w for w in row.text.split() if w.startswith("zqmark")), None)
            if word is not None:
                hits = await store.search(word, SearchFilters(session_id="p1", state="archived"))
                assert row.id in {h.message_id for h in hits}, (word, op)


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(max_turns=10), operations)
def test_any_mix_of_strategies_keeps_the_view_valid_and_the_archive_searchable(
    messages: list[ChatMessage], ops: list[tuple[object, ...]]
) -> None:
    asyncio.run(run([replace(m) for m in messages], ops))
