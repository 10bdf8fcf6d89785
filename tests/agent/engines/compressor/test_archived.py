"""What a summary archives is not pruned first (that was most of the time a compaction
took), yet the summarizer's input stays bounded; and the shortcuts taken for speed (a pruned
output's first line, the transcript rendered only where it is kept) give the same result."""

from __future__ import annotations

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from agent.compaction import compact
from agent.engines.compressor.engine import ContextCompressor
from agent.engines.compressor.prune import PRUNED_MARK, _one_line
from agent.prompts import serialize_message, serialize_messages
from agent.tokens import estimate_text_tokens
from agent.types import AgentSession, ChatMessage
from tests.agent.conftest import ScriptedSummarizer, assistant, persist, tool_round, user
from tests.fakes.memory_store import InMemoryStore


def long_outputs(turns: int, chars: int) -> list[ChatMessage]:
    """Exchanges whose tool output is ``chars`` long, marked at its start and its end."""
    out: list[ChatMessage] = []
    for t in range(turns):
        out.append(user(f"Question {t}: what does the deploy log say? " * 4))
        body = f"START-{t} deploy log\n" + "step ok\n" * (chars // 8) + f"END-{t} exit code 1"
        out.extend(tool_round([body], name="terminal"))
        out.append(assistant(f"Answer {t}: the deploy failed at the last step. " * 4))
    return out


async def test_the_archived_range_reaches_the_summary_unpruned_and_bounded(
    engine: ContextCompressor, summarizer: ScriptedSummarizer, store: InMemoryStore, session: AgentSession
) -> None:
    turns, chars = 12, 60_000
    await persist(store, session.id, long_outputs(turns, chars))

    result = await compact(engine, store, session, trigger="manual")

    assert result.record is not None and result.record.messages_archived > 0
    prompt = summarizer.prompt()
    archived = [t for t in range(turns) if f"START-{t}" in prompt]
    assert archived, "the summarizer saw none of the archived outputs"
    for t in archived:  # the output itself, its head and its tail, not a pruned line about it
        assert f"END-{t} exit code 1" in prompt
    assert PRUNED_MARK not in prompt
    # Bounded: each output is clipped, so the prompt is a small fraction of what it summarizes.
    assert len(prompt) < 10_000 + len(archived) * 2_500 < turns * chars // 10


@hsettings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(["a", "b", " ", "\n", "\t", "é"]), max_size=3_000),
    st.integers(min_value=2, max_value=80),
)
def test_one_line_reads_a_prefix_yet_equals_collapsing_the_whole(text: str, limit: int) -> None:
    whole = " ".join(text.split())
    expected = whole if len(whole) <= limit else whole[: limit - 1] + "…"
    assert _one_line(text, limit) == expected


def serialize_all_then_cut(ms: list[ChatMessage], max_tokens: int) -> str:
    """The definition: render every message, keep the head (30%) and the tail that fit."""
    rendered = [serialize_message(m) for m in ms]
    sizes = [estimate_text_tokens(r) + 1 for r in rendered]
    if sum(sizes) <= max_tokens:
        return "\n".join(rendered)
    head = used = 0
    while head < len(rendered) and used + sizes[head] <= max_tokens * 0.3:
        used += sizes[head]
        head += 1
    tail = len(rendered)
    while tail > head and used + sizes[tail - 1] <= max_tokens:
        tail -= 1
        used += sizes[tail]
    marker = f"[... {tail - head} messages omitted for length ...]"
    return "\n".join([*rendered[:head], marker, *rendered[tail:]])


@hsettings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=3_000), max_size=30), st.integers(10, 3_000))
def test_the_transcript_renders_only_what_it_keeps_yet_is_the_same(lengths: list[int], budget: int) -> None:
    ms = [user("x" * n) if i % 2 == 0 else assistant("y " * (n // 2)) for i, n in enumerate(lengths)]
    assert serialize_messages(ms, max_tokens=budget) == serialize_all_then_cut(ms, budget)


async def test_an_automatic_compaction_that_must_summarize_does_not_prune_the_archived_range(
    engine: ContextCompressor, summarizer: ScriptedSummarizer, store: InMemoryStore, session: AgentSession
) -> None:
    # So much plain text that pruning tool output could never get under target: straight to a summary.
    question = "please read the whole deploy log. " * 120
    outputs = [f"START-{t} log\n" + "step ok\n" * 500 + f"END-{t} exit 0" for t in range(8)]
    turns = [
        [user(f"Question {t}: {question}"), *tool_round([out]), assistant("ok")]
        for t, out in enumerate(outputs)
    ]
    await persist(store, session.id, [m for turn in turns for m in turn])

    result = await compact(engine, store, session, trigger="in_loop")

    assert result.record is not None and summarizer.requests
    prompt = summarizer.prompt()
    archived = [t for t in range(8) if f"START-{t}" in prompt]
    assert archived and all(f"END-{t} exit 0" in prompt for t in archived)
    assert PRUNED_MARK not in prompt
