"""What a summary archives is not pruned first (issue 10: that was most of the time a compaction
took), yet the summarizer's input stays bounded; and the one-line description of a pruned
output reads only as much of it as it shows."""

from __future__ import annotations

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from agent.compaction import compact
from agent.compressor import ContextCompressor
from agent.compressor_prune import PRUNED_MARK, _one_line
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
