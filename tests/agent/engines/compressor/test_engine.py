"""ContextCompressor: when it fires, what it keeps, how it summarizes, and how it fails."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import itertools
import json
import re
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from agent.compaction import compact
from agent.engines.compressor.boundaries import choose_boundaries
from agent.engines.compressor.engine import BREAKER_MAX_SECONDS, ContextCompressor
from agent.engines.compressor.sizes import summary_budget
from agent.errors import AuthenticationFailed, Overloaded, SpendLimitReached
from agent.offline import OfflineProvider
from agent.prompts import EMPTY_ITEM, HANDOFF_PREFIX, HANDOFF_SUFFIX, SECTIONS, format_handoff
from agent.provider import LLMRequest, LLMResponse
from agent.settings import CompressionSettings
from agent.tokens import PromptSize, estimate_message_tokens, model_info, prompt_size
from agent.transcript import validate_messages
from agent.types import AgentSession, ChatMessage, ContextState, Usage
from tests.agent.conftest import (
    CANNED_SUMMARY,
    Cut,
    FakeClock,
    ScriptedSummarizer,
    assistant,
    conversation,
    latest_human,
    persist,
    transcripts,
    user,
)
from tests.fakes.memory_store import InMemoryStore

LONG = {"words": 400}


def summaries(messages: list[ChatMessage]) -> list[ChatMessage]:
    return [m for m in messages if m.kind == "summary"]


async def open_breaker(store: InMemoryStore, session: AgentSession, clock: FakeClock) -> None:
    """Three failures behind, an hour of back-off ahead."""
    opened = ContextState(consecutive_failures=3, cooldown_until=clock.now + timedelta(hours=1))
    await store.save_context_state(session.id, opened)


# ---- when -----------------------------------------------------------------------------------


def test_fires_at_threshold_not_below(engine: ContextCompressor, session: AgentSession) -> None:
    state = ContextState()
    assert engine.should_compress(session, state, 10_000)
    assert engine.should_compress(session, state, 15_000)
    assert not engine.should_compress(session, state, 9_999)


def test_hygiene_uses_its_own_threshold(engine: ContextCompressor, session: AgentSession) -> None:
    state = ContextState()
    assert not engine.should_compress(session, state, 16_000, trigger="hygiene")
    assert engine.should_compress(session, state, 17_000, trigger="hygiene")


def test_hygiene_never_fires_below_the_deployers_in_loop_threshold(session: AgentSession) -> None:
    tuned = CompressionSettings(threshold=0.9)  # hygiene_threshold stays 0.85
    engine = ContextCompressor(tuned, ScriptedSummarizer(), summary_model="claude-haiku-4-5")
    assert not engine.should_compress(session, ContextState(), 17_500, trigger="hygiene")
    assert engine.should_compress(session, ContextState(), 18_000, trigger="hygiene")


def test_model_threshold_longest_key_wins(session: AgentSession) -> None:
    tuned = CompressionSettings(model_thresholds={"claude": 0.9, "claude-sonnet": 0.3})
    engine = ContextCompressor(tuned, ScriptedSummarizer(), summary_model="claude-haiku-4-5")
    assert engine.should_compress(session, ContextState(), 6_000)
    assert not engine.should_compress(session, ContextState(), 5_999)


def test_real_usage_beats_rough_estimate(engine: ContextCompressor, session: AgentSession) -> None:
    messages = [ChatMessage.user("hello " * 100, id=1)]
    state = ContextState()
    rough = engine.estimate_prompt_tokens(session, state, messages)
    assert not engine.should_compress(session, state, rough)
    # The API says the prompt (tools, images, a dense language...) is far bigger than it looks.
    engine.on_usage(session, state, Usage(input_tokens=12_000), prompt_size(session.system_prompt, messages))
    real = engine.estimate_prompt_tokens(session, state, messages)
    assert real >= 12_000
    assert engine.should_compress(session, state, real)


def test_real_usage_counts_cache_tokens_of_one_call(engine: ContextCompressor, session: AgentSession) -> None:
    state = ContextState()
    usage = Usage(input_tokens=10, cache_creation_input_tokens=4_000, cache_read_input_tokens=7_000)
    engine.on_usage(session, state, usage, PromptSize(messages=10_000, overhead=500))
    assert state.last_prompt_tokens == 11_010


# ---- what it keeps --------------------------------------------------------------------------


async def test_summary_keeps_head_and_latest_user_message_verbatim(
    engine: ContextCompressor, store: InMemoryStore, session: AgentSession
) -> None:
    opening = [
        ChatMessage.user("hi, I need help with the app"),
        ChatMessage.assistant("Sure, what is wrong?"),
    ]
    stored = await persist(store, session.id, opening + conversation(20, **LONG))
    result = await compact(engine, store, session, trigger="in_loop")
    assert result.outcome.status == "ok"
    view = result.messages
    assert view[0] == stored[0] and view[1] == stored[1]  # the first exchange
    assert len(summaries(view)) == 1
    assert latest_human(view) == latest_human(stored)
    assert validate_messages(view) == []
    assert result.outcome.tokens_after < result.outcome.tokens_before


async def test_summary_has_handoff_framing_and_every_heading(
    store: InMemoryStore, session: AgentSession, settings: CompressionSettings, clock: FakeClock
) -> None:
    partial = "## Goal\n- build it\n## Next Steps\n- write tests"
    engine = ContextCompressor(
        settings, ScriptedSummarizer(partial), summary_model="claude-haiku-4-5", clock=clock
    )
    await persist(store, session.id, conversation(20, **LONG))
    result = await compact(engine, store, session, trigger="in_loop")
    text = summaries(result.messages)[0].text
    assert text.startswith(HANDOFF_PREFIX) and text.endswith(HANDOFF_SUFFIX)
    assert "REFERENCE ONLY" in text and "latest message" in text
    for name in SECTIONS:
        assert f"## {name}\n" in text
    assert "Next Steps" not in text and "- write tests" in text
    assert '"compaction_id"' in text  # the Archived section says how to recall


async def test_summary_request_uses_summary_model_budget_and_purpose(
    engine: ContextCompressor, summarizer: ScriptedSummarizer, store: InMemoryStore, session: AgentSession
) -> None:
    await persist(store, session.id, conversation(20, **LONG))
    await compact(engine, store, session, trigger="in_loop")
    request = summarizer.requests[0]
    assert request.purpose == "summary" and request.model == "claude-haiku-4-5"
    assert "do not answer any question" in request.system[0]["text"]
    budget = summary_budget(sum(estimate_message_tokens(m) for m in conversation(20, **LONG)), 20_000)
    assert budget <= request.max_tokens <= min(budget * 3 // 2, model_info("claude-haiku-4-5").max_output)


async def test_the_summary_budget_stays_within_the_summary_models_output_cap(
    store: InMemoryStore, session: AgentSession, settings: CompressionSettings, clock: FakeClock
) -> None:
    summarizer = ScriptedSummarizer()
    engine = ContextCompressor(settings, summarizer, summary_model="claude-3-haiku-20240307", clock=clock)
    big = dataclasses.replace(session, context_window=1_000_000)
    await persist(store, session.id, conversation(200, **LONG))
    await compact(engine, store, big, trigger="manual")
    [request] = summarizer.requests
    assert request.max_tokens <= 4_096
    assert "at most about 2730 tokens" in summarizer.prompt()  # two thirds of the cap, asked for


async def test_a_cut_off_summary_is_retried_once_with_a_larger_budget(
    store: InMemoryStore, session: AgentSession, settings: CompressionSettings, clock: FakeClock
) -> None:
    summarizer = ScriptedSummarizer(Cut("## Goal\n- build the thing\n## Constraints & Preferences\n- use"))
    engine = ContextCompressor(settings, summarizer, summary_model="claude-haiku-4-5", clock=clock)
    await persist(store, session.id, conversation(20, **LONG))
    result = await compact(engine, store, session, trigger="in_loop")
    first, second = summarizer.requests
    assert first.max_tokens < second.max_tokens <= model_info("claude-haiku-4-5").max_output
    assert result.outcome.status == "ok"
    text = summaries(result.messages)[0].text
    assert "canned active task" in text and "build the thing" not in text
    assert [r.usage.output_tokens for r in store.usage[session.id]] == [first.max_tokens, 200]


async def test_a_summary_cut_off_twice_is_never_accepted(
    store: InMemoryStore, session: AgentSession, settings: CompressionSettings, clock: FakeClock
) -> None:
    partial = "## Goal\n- build the thing\n## Constraints & Preferences\n- use"
    summarizer = ScriptedSummarizer(Cut(partial), Cut(partial))
    engine = ContextCompressor(settings, summarizer, summary_model="claude-haiku-4-5", clock=clock)
    stored = await persist(store, session.id, conversation(20, **LONG))
    result = await compact(engine, store, session, trigger="in_loop")
    assert len(summarizer.requests) == 2 and result.outcome.status == "fallback"
    text = summaries(result.messages)[0].text
    assert "build the thing" not in text
    active_task = text.split("## Active Task\n")[1].split("\n## ")[0]
    assert active_task != EMPTY_ITEM and "Question" in active_task  # the extractive summary's own task
    summarized = [m for m in stored if m.id not in {v.id for v in result.messages}]
    assert summarized and (await store.load_context_state(session.id)).consecutive_failures == 0


async def test_without_a_focus_the_summary_focuses_on_the_last_three_user_turns(
    engine: ContextCompressor, summarizer: ScriptedSummarizer, store: InMemoryStore, session: AgentSession
) -> None:
    asks = ["Make the invoice PDF smaller.", "Also use A4 paper.", "And put the logo top left."]
    messages = conversation(20, **LONG)
    for offset, ask in zip((-12, -8, -4), asks, strict=True):  # the questions of the last turns
        messages[offset] = ChatMessage.user(ask)
    await persist(store, session.id, messages)
    await compact(engine, store, session, trigger="in_loop")
    prompt = summarizer.prompt()
    focus = prompt[prompt.index("latest user messages") :]
    assert all(ask in focus for ask in asks) and "Question 16" not in focus

    await persist(store, session.id, conversation(20, **LONG))
    await compact(engine, store, session, trigger="manual", focus="the invoices")
    prompt = summarizer.prompt()
    assert "focus on: the invoices" in prompt and "latest user messages" not in prompt


async def test_the_newest_summarized_request_is_kept_verbatim_as_the_task_snapshot(
    engine: ContextCompressor, store: InMemoryStore, session: AgentSession
) -> None:
    stored = await persist(store, session.id, conversation(20, **LONG))
    result = await compact(engine, store, session, trigger="in_loop")
    kept = {m.id for m in result.messages}
    newest = [m for m in stored if m.id not in kept and latest_human([m]) is not None][-1]
    task = summaries(result.messages)[0].text.split("## Active Task\n")[1].split("\n## ")[0]
    assert newest.text.strip() in task  # verbatim, whatever the model wrote
    assert "- canned active task" in task


async def test_the_memory_index_is_in_the_summary_after_a_compaction(
    engine: ContextCompressor, store: InMemoryStore, session: AgentSession
) -> None:
    scope = session.key or session.id
    await store.memory_put(scope, "/memories/preferences.md", "Prefers metric units.\nNo emoji.")
    await store.memory_put(scope, "/memories/projects/billing.md", "# Billing migration\nTarget: PG 16")
    await store.memory_put("another chat", "/memories/secret.md", "not this one")
    await persist(store, session.id, conversation(20, **LONG))
    result = await compact(engine, store, session, trigger="in_loop")
    text = summaries(result.messages)[0].text
    memory = text.split("## Memory\n")[1].split("\n## ")[0]
    assert "/memories/preferences.md" in memory and "Prefers metric units." in memory
    assert "/memories/projects/billing.md" in memory and "Billing migration" in memory
    assert "secret" not in memory and "memory" in memory.lower()

    await persist(store, session.id, conversation(20, **LONG))
    again = await compact(engine, store, session, trigger="in_loop")
    assert summaries(again.messages)[0].text.count("## Memory\n") == 1


def test_summary_budget_is_clamped() -> None:
    assert summary_budget(1_000, 200_000) == 2_000
    assert summary_budget(30_000, 200_000) == 6_000
    assert summary_budget(500_000, 200_000) == 10_000
    assert summary_budget(500_000, 1_000_000) == 12_000
    assert summary_budget(1_000, 20_000) == 1_000


async def test_recompression_feeds_previous_summary(
    engine: ContextCompressor, summarizer: ScriptedSummarizer, store: InMemoryStore, session: AgentSession
) -> None:
    await persist(store, session.id, conversation(20, **LONG))
    first = await compact(engine, store, session, trigger="in_loop")
    previous = summaries(first.messages)[0]
    await persist(store, session.id, conversation(20, **LONG))
    second = await compact(engine, store, session, trigger="in_loop")
    prompt = summarizer.prompt(-1)
    assert "<previous_summary>" in prompt and "canned goal" in prompt
    assert HANDOFF_PREFIX not in prompt  # the framing is stripped before it is fed back
    assert previous.id not in {m.id for m in second.messages}
    assert len(summaries(second.messages)) == 1
    recalled = await store.recall(session.id, from_id=previous.id, to_id=previous.id)
    assert recalled.messages[0].kind == "summary"


class GoalKeeper(ScriptedSummarizer):
    """A summarizer that, like a good model, keeps every goal it reads (transcript or previous summary)."""

    async def create(self, request: LLMRequest) -> LLMResponse:
        prompt = "".join(b["text"] for b in request.messages[-1]["content"])
        goals = dict.fromkeys(line.strip().lstrip("- ") for line in prompt.splitlines() if "GOAL:" in line)
        self.replies.append(CANNED_SUMMARY.replace("- canned goal", "\n".join(f"- {g}" for g in goals)))
        return await super().create(request)


async def test_every_earlier_summary_reaches_the_next_one(
    store: InMemoryStore, session: AgentSession, settings: CompressionSettings, clock: FakeClock
) -> None:
    summarizer = GoalKeeper()
    engine = ContextCompressor(settings, summarizer, summary_model="claude-haiku-4-5", clock=clock)
    goal = "GOAL: move the billing service to PostgreSQL 16 without downtime."
    first = ChatMessage.user(goal + " Background: " + "the service has grown over the years. " * 300)
    short = [
        ChatMessage.user("ok, go on") if i % 2 == 0 else ChatMessage.assistant("Done.") for i in range(6)
    ]
    await persist(store, session.id, [first, *conversation(12, **LONG), *short])
    for _ in range(2):
        result = await compact(engine, store, session, trigger="manual")
        assert result.record is not None and len(summaries(result.messages)) <= 1
    await persist(store, session.id, conversation(12, **LONG))
    third = await compact(engine, store, session, trigger="in_loop")

    assert third.record is not None and len(summaries(third.messages)) == 1
    assert goal in summarizer.prompt(-1)
    assert goal in summaries(third.messages)[0].text


async def test_two_active_summaries_from_before_are_both_fed_to_the_next(
    engine: ContextCompressor, summarizer: ScriptedSummarizer, store: InMemoryStore, session: AgentSession
) -> None:
    older = ChatMessage.user(format_handoff("## Goal\n- GOAL: the older goal"), kind="summary")
    newer = ChatMessage.user(format_handoff("## Goal\n- the newer goal"), kind="summary")
    await persist(store, session.id, [older, newer, *conversation(20, **LONG)])
    result = await compact(engine, store, session, trigger="in_loop")
    prompt = summarizer.prompt()
    assert prompt.index("GOAL: the older goal") < prompt.index("the newer goal")
    assert len(summaries(result.messages)) == 1


async def test_the_archived_pointer_names_exactly_what_its_compaction_archived(
    engine: ContextCompressor, store: InMemoryStore, session: AgentSession
) -> None:
    await persist(store, session.id, conversation(20, **LONG))
    first = await compact(engine, store, session, trigger="in_loop")
    await persist(store, session.id, conversation(20, **LONG))
    second = await compact(engine, store, session, trigger="in_loop")
    assert first.record is not None and second.record is not None

    archived = summaries(second.messages)[0].text.split("## Archived\n")[1]
    pointer = archived.splitlines()[0]
    assert f'recall {{"compaction_id": "{second.record.id}"}}' in pointer and "from_id" not in pointer
    assert f'"compaction_id": "{first.record.id}"' in archived  # the older pointer is carried along
    page = await store.recall(session.id, compaction_id=second.record.id, limit=1000)
    assert page.total == second.record.messages_archived


NOTE = re.compile(
    r"^- \d+ messages \(([^)]*?)(?:, \d{4}-[^)]*)?\) are archived.*\"compaction_id\": \"(\w+)\"", re.M
)
RUN = re.compile(r"#(\d+)(?:–#(\d+))?")


async def test_the_archived_ranges_of_a_summary_never_overlap(
    engine: ContextCompressor, store: InMemoryStore, session: AgentSession
) -> None:
    for _ in range(4):  # the first compaction keeps the first exchange; the next one archives it
        await persist(store, session.id, conversation(20, **LONG))
        done = await compact(engine, store, session, trigger="in_loop")
        assert done.record is not None
    archived = summaries(done.messages)[0].text.split("## Archived\n")[1]
    notes = {cid: [(int(a), int(b or a)) for a, b in RUN.findall(ids)] for ids, cid in NOTE.findall(archived)}
    assert len(notes) == 4, archived
    spans = sorted(span for runs in notes.values() for span in runs)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end < start, archived
    # Each compaction's runs hold what it archived verbatim, and nothing another one archived (an
    # earlier summary it archived is not in them: that summary's own pointers are carried instead).
    for compaction_id, runs in notes.items():
        page = await store.recall(session.id, compaction_id=compaction_id, limit=1000)
        ids = {m.id for m in page.messages if m.kind != "summary" and m.id is not None}
        covered = {i for a, b in runs for i in range(a, b + 1)}
        assert ids <= covered, (compaction_id, sorted(ids), runs)
        for other, other_runs in notes.items():
            if other != compaction_id:
                assert not ids & {i for a, b in other_runs for i in range(a, b + 1)}


async def test_phase_one_alone_prunes_old_tool_output(
    engine: ContextCompressor, summarizer: ScriptedSummarizer, store: InMemoryStore, session: AgentSession
) -> None:
    stored = await persist(store, session.id, conversation(12, output_chars=3000, words=40))
    result = await compact(engine, store, session, trigger="in_loop")
    assert summarizer.requests == []
    assert summaries(result.messages) == []
    assert result.outcome.tokens_after <= engine.target_tokens(session)
    pruned = result.messages[2].content[0]["content"]
    assert pruned.startswith("[pruned tool output] bash") and "exit 0" in pruned and "3,0" in pruned
    original = await store.recall(session.id, from_id=stored[2].id, to_id=stored[2].id)
    assert original.messages[0].content == stored[2].content
    assert result.messages[-1] == stored[-1]


async def test_compaction_copies_never_carry_a_platform_message_id(
    engine: ContextCompressor, session: AgentSession
) -> None:
    messages = numbered(conversation(12, output_chars=3000, words=40))
    messages[2] = dataclasses.replace(messages[2], platform_message_id="tg:77")  # a tool result
    outcome = await engine.compress(session, messages, ContextState(), trigger="in_loop")
    assert outcome.plan is not None
    copy_ = next(i.message for i in outcome.plan.insertions if i.anchor_id == messages[2].id)
    assert copy_.content != messages[2].content and copy_.platform_message_id is None


async def test_identical_outputs_are_deduplicated(engine: ContextCompressor, session: AgentSession) -> None:
    same = "same listing\n" * 30
    messages = conversation(12, output_chars=10, words=100)
    for index in (2, 6):
        messages[index] = messages[index].with_content([{**messages[index].content[0], "content": same}])
    messages = numbered(messages)
    outcome = await engine.compress(session, messages, ContextState(), trigger="in_loop")
    assert outcome.plan is not None
    copies = {i.anchor_id: i.message for i in outcome.plan.insertions}
    first_id = messages[2].content[0]["tool_use_id"]
    assert copies[3].content[0]["content"].startswith("[pruned tool output] bash")
    assert copies[7].content[0]["content"].startswith(f"[same output as tool call {first_id}]")
    assert 'recall {"from_id": 7, "to_id": 7}' in copies[7].content[0]["content"]  # a way back, too


async def test_oversized_tool_input_shrinks_inside_valid_json(
    engine: ContextCompressor, session: AgentSession
) -> None:
    messages = conversation(12, output_chars=10, words=100)
    big = {"path": "/tmp/x.py", "content": "z" * 5000, "n": 3}
    use = messages[1].content[1]
    messages[1] = messages[1].with_content([messages[1].content[0], {**use, "input": big}])
    messages = numbered(messages)
    outcome = await engine.compress(session, messages, ContextState(), trigger="in_loop")
    assert outcome.plan is not None
    copy_ = next(i.message for i in outcome.plan.insertions if i.anchor_id == 2)
    shrunk = copy_.content[1]["input"]
    assert json.loads(json.dumps(shrunk)) == shrunk
    assert shrunk["path"] == "/tmp/x.py" and shrunk["n"] == 3
    assert len(shrunk["content"]) < 400 and "truncated" in shrunk["content"]


def numbered(messages: list[ChatMessage]) -> list[ChatMessage]:
    """The messages as if persisted: ids and seqs 1..n."""
    return [dataclasses.replace(m, id=i + 1, seq=i + 1) for i, m in enumerate(messages)]


WINDOWS = st.sampled_from([4_000, 8_000, 16_000])


@given(transcripts(), WINDOWS)
@hsettings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_compressed_view_is_always_valid(messages: list[ChatMessage], window: int) -> None:
    asyncio.run(_compress_and_check(messages, window))


@given(transcripts(), st.integers(0, 3000), st.integers(1, 6), st.integers(1, 3), st.booleans())
@hsettings(max_examples=60, deadline=None)
def test_boundaries_never_split_a_tool_pair(
    messages: list[ChatMessage], budget: int, floor: int, users: int, protect_head: bool
) -> None:
    messages = numbered(messages)
    sizes = [estimate_message_tokens(m) for m in messages]
    b = choose_boundaries(
        messages,
        sizes,
        protect_head=protect_head,
        tail_budget=budget,
        tail_floor=floor,
        tail_cap=budget,
        min_tail_users=users,
    )
    assert 0 <= b.head_end <= b.tail_start <= b.protect_start <= len(messages)
    before, after = messages[: b.tail_start], messages[b.tail_start :]
    uses_before = {u for m in before for u in m.tool_use_ids()}
    assert not uses_before & {r for m in after for r in m.tool_result_ids()}
    head_uses = {u for m in messages[: b.head_end] for u in m.tool_use_ids()}
    assert not head_uses  # the head never holds a tool round that the middle would cut
    latest = latest_human(messages)
    assert latest is None or latest not in messages[b.head_end : b.tail_start]  # kept verbatim


@pytest.mark.full
@given(transcripts(max_turns=40), WINDOWS)
@hsettings(
    max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
def test_compressed_view_is_always_valid_full(messages: list[ChatMessage], window: int) -> None:
    asyncio.run(_compress_and_check(messages, window))


async def _compress_and_check(messages: list[ChatMessage], window: int) -> None:
    session = AgentSession(id="h", system_prompt="sys", model="claude-sonnet-4-5", context_window=window)
    store = InMemoryStore()
    latest = latest_human(await persist(store, session.id, messages))
    engine = ContextCompressor(
        CompressionSettings(protect_last_n=2), OfflineProvider(), summary_model="claude-haiku-4-5"
    )
    for trigger in ("manual", "manual", "reactive", "manual"):
        view = (await compact(engine, store, session, trigger=trigger)).messages
        assert validate_messages(view) == [], (validate_messages(view), [m.to_wire() for m in view])
        assert latest_human(view) == latest
        assert len(summaries(view)) <= 1
        for index, m in enumerate(view[:-1]):
            if m.kind == "summary":
                assert not view[index + 1].tool_result_ids()  # the tail never starts on a result
        if trigger == "reactive" and view[-1].role == "assistant" and not view[-1].tool_use_ids():
            # The conversation goes on between compactions.
            latest, _ = await persist(store, session.id, [user("and then?"), assistant("Then this.")])


# ---- how it fails ---------------------------------------------------------------------------


async def test_summarizer_error_sets_cooldown_and_keeps_session(
    store: InMemoryStore, session: AgentSession, settings: CompressionSettings, clock: FakeClock
) -> None:
    engine = ContextCompressor(
        settings, ScriptedSummarizer(Overloaded("busy")), summary_model="claude-haiku-4-5", clock=clock
    )
    stored = await persist(store, session.id, conversation(20, **LONG))
    result = await compact(engine, store, session, trigger="in_loop", prompt_tokens=12_000)
    assert result.record is None and result.outcome.status == "failed"
    assert await store.load_active(session.id) == stored
    state = await store.load_context_state(session.id)
    assert state.consecutive_failures == 1
    assert state.cooldown_until == clock.now + timedelta(seconds=600)
    assert not engine.should_compress(session, state, 12_000)
    clock.advance(601)
    assert engine.should_compress(session, state, 12_000)


async def test_breaker_opens_after_repeated_failures_but_manual_still_runs(
    store: InMemoryStore, session: AgentSession, settings: CompressionSettings, clock: FakeClock
) -> None:
    summarizer = ScriptedSummarizer(*(Overloaded("busy") for _ in range(3)))
    engine = ContextCompressor(settings, summarizer, summary_model="claude-haiku-4-5", clock=clock)
    await persist(store, session.id, conversation(20, **LONG))
    for _ in range(3):
        await compact(engine, store, session, trigger="in_loop", prompt_tokens=12_000)
        clock.advance(601)
    state = await store.load_context_state(session.id)
    assert state.consecutive_failures == 3
    assert not engine.should_compress(session, state, 12_000)
    result = await compact(engine, store, session, trigger="manual")
    assert result.outcome.status == "ok" and len(summarizer.requests) == 4
    state = await store.load_context_state(session.id)
    assert state.consecutive_failures == 0 and engine.should_compress(session, state, 12_000)


async def test_the_breaker_half_opens_after_its_back_off_and_a_success_closes_it(
    store: InMemoryStore, session: AgentSession, settings: CompressionSettings, clock: FakeClock
) -> None:
    summarizer = ScriptedSummarizer(*(Overloaded("busy") for _ in range(3)))  # then healthy again
    engine = ContextCompressor(settings, summarizer, summary_model="claude-haiku-4-5", clock=clock)
    await persist(store, session.id, conversation(20, **LONG))
    for _ in range(3):
        await compact(engine, store, session, trigger="in_loop", prompt_tokens=12_000)
        clock.advance(601)
    state = await store.load_context_state(session.id)
    assert state.consecutive_failures == 3 and not engine.should_compress(session, state, 12_000)

    clock.advance(BREAKER_MAX_SECONDS)  # past any back-off: the outage is over
    assert engine.should_compress(session, state, 12_000)
    result = await compact(engine, store, session, trigger="in_loop", prompt_tokens=12_000)

    assert result.outcome.status == "ok" and len(summarizer.requests) == 4
    state = await store.load_context_state(session.id)
    assert state.consecutive_failures == 0 and state.cooldown_until is None


async def test_a_failed_half_open_attempt_doubles_the_back_off_up_to_the_cap(
    store: InMemoryStore, session: AgentSession, settings: CompressionSettings, clock: FakeClock
) -> None:
    summarizer = ScriptedSummarizer(*(Overloaded("busy") for _ in range(12)))
    engine = ContextCompressor(settings, summarizer, summary_model="claude-haiku-4-5", clock=clock)
    await persist(store, session.id, conversation(20, **LONG))
    waits: list[float] = []
    for _ in range(12):
        await compact(engine, store, session, trigger="in_loop", prompt_tokens=12_000)
        state = await store.load_context_state(session.id)
        assert state.cooldown_until is not None
        waits.append((state.cooldown_until - clock.now).total_seconds())
        clock.advance(waits[-1] + 1)
    assert len(summarizer.requests) == 12  # exactly one automatic attempt per back-off
    assert waits[:6] == [600, 600, 1200, 2400, 4800, 9600]
    assert max(waits) == BREAKER_MAX_SECONDS == waits[-1]


async def test_an_extractive_fallback_that_gets_under_target_closes_the_breaker(
    store: InMemoryStore, session: AgentSession, settings: CompressionSettings, clock: FakeClock
) -> None:
    summarizer = ScriptedSummarizer()
    engine = ContextCompressor(settings, summarizer, summary_model="claude-haiku-4-5", clock=clock)
    await open_breaker(store, session, clock)
    await persist(store, session.id, conversation(20, **LONG))
    result = await compact(engine, store, session, trigger="reactive", prompt_tokens=21_000)
    assert result.outcome.status == "fallback" and summarizer.requests == []
    assert result.outcome.tokens_after <= engine.target_tokens(session)
    state = await store.load_context_state(session.id)
    assert state.consecutive_failures == 0 and state.cooldown_until is None


async def test_must_shrink_falls_back_to_extractive_summary(
    store: InMemoryStore, session: AgentSession, settings: CompressionSettings, clock: FakeClock
) -> None:
    engine = ContextCompressor(
        settings, ScriptedSummarizer(Overloaded("busy")), summary_model="claude-haiku-4-5", clock=clock
    )
    stored = await persist(store, session.id, conversation(20, **LONG))
    result = await compact(engine, store, session, trigger="reactive", prompt_tokens=21_000)
    assert result.outcome.status == "fallback" and result.record is not None
    assert result.record.status == "fallback"
    text = summaries(result.messages)[0].text
    assert text.startswith(HANDOFF_PREFIX)
    assert all(f"## {name}\n" in text for name in SECTIONS)
    assert "Question 1:" in text  # the goal: the first user message of the summarized range
    assert latest_human(result.messages) == latest_human(stored)
    assert (await store.load_context_state(session.id)).consecutive_failures == 1


async def test_the_extractive_fallback_carries_the_previous_summary(
    store: InMemoryStore, session: AgentSession, settings: CompressionSettings, clock: FakeClock
) -> None:
    summarizer = ScriptedSummarizer(CANNED_SUMMARY, Overloaded("busy"))
    engine = ContextCompressor(settings, summarizer, summary_model="claude-haiku-4-5", clock=clock)
    await persist(store, session.id, conversation(20, **LONG))
    first = await compact(engine, store, session, trigger="in_loop")
    await persist(store, session.id, conversation(20, **LONG))
    second = await compact(engine, store, session, trigger="reactive", prompt_tokens=21_000)

    assert first.record is not None and second.outcome.status == "fallback"
    text = summaries(second.messages)[0].text
    goal = text.split("## Goal\n")[1].split("\n## ")[0]
    assert goal.strip() == "- canned goal"  # the goal of the earlier summary, not a later message
    assert "- canned constraints & preferences" in text and "- canned key decisions" in text
    assert f'"compaction_id": "{first.record.id}"' in text


async def test_breaker_open_hygiene_at_the_edge_of_the_window_goes_straight_to_fallback(
    store: InMemoryStore, session: AgentSession, settings: CompressionSettings, clock: FakeClock
) -> None:
    summarizer = ScriptedSummarizer()
    engine = ContextCompressor(settings, summarizer, summary_model="claude-haiku-4-5", clock=clock)
    await open_breaker(store, session, clock)
    await persist(store, session.id, conversation(20, **LONG))
    result = await compact(engine, store, session, trigger="hygiene", prompt_tokens=19_500)
    assert result.outcome.status == "fallback" and summarizer.requests == []


async def test_breaker_open_hygiene_with_room_left_changes_nothing(
    store: InMemoryStore, session: AgentSession, settings: CompressionSettings, clock: FakeClock
) -> None:
    summarizer = ScriptedSummarizer()
    engine = ContextCompressor(settings, summarizer, summary_model="claude-haiku-4-5", clock=clock)
    await open_breaker(store, session, clock)
    stored = await persist(store, session.id, conversation(20, **LONG))
    result = await compact(engine, store, session, trigger="hygiene", prompt_tokens=18_000)
    assert result.record is None and result.outcome.status == "failed"
    assert await store.load_active(session.id) == stored and summarizer.requests == []


async def test_auth_and_spend_errors_leave_everything_unchanged(
    store: InMemoryStore, session: AgentSession, settings: CompressionSettings, clock: FakeClock
) -> None:
    for error in (AuthenticationFailed("bad key"), SpendLimitReached("no credit")):
        engine = ContextCompressor(settings, ScriptedSummarizer(error), summary_model="m", clock=clock)
        if not await store.load_active(session.id):
            await persist(store, session.id, conversation(20, **LONG))
        before_state = await store.load_context_state(session.id)
        before_view = await store.load_active(session.id)
        result = await compact(engine, store, session, trigger="reactive", prompt_tokens=21_000)
        assert result.outcome.plan is None and result.outcome.status == "failed"
        assert await store.load_active(session.id) == before_view
        # Only the bookkeeping of which model the (unchanged) calibration belongs to may be written.
        bound = dataclasses.replace(before_state, token_scale_model=session.model)
        assert await store.load_context_state(session.id) == bound


async def test_ineffective_compactions_stop_until_context_changes(
    engine: ContextCompressor, store: InMemoryStore, session: AgentSession
) -> None:
    await persist(store, session.id, conversation(20, **LONG))
    for _ in range(2):
        result = await compact(engine, store, session, trigger="in_loop", prompt_tokens=12_000)
        assert result.outcome.plan is not None
        state = await store.load_context_state(session.id)
        # The next real call still reports a prompt over the threshold (say, huge tool schemas).
        engine.on_usage(session, state, Usage(input_tokens=11_000), PromptSize(7_500, 500))
        await store.save_context_state(session.id, state)
    state = await store.load_context_state(session.id)
    assert state.ineffective_strikes == 2
    assert not engine.should_compress(session, state, 11_500)
    assert engine.should_compress(session, state, 12_200)  # grew by more than 10%
    assert engine.should_compress(session, state, 11_500, trigger="manual")
    await persist(store, session.id, conversation(4, **LONG))
    manual = await compact(engine, store, session, trigger="manual")
    assert manual.record is not None
    assert (await store.load_context_state(session.id)).ineffective_strikes == 0


async def test_effective_compaction_clears_strikes(engine: ContextCompressor, session: AgentSession) -> None:
    state = ContextState(
        ineffective_strikes=1, strike_context_tokens=11_000, extra={"awaiting_usage_check": True}
    )
    engine.on_usage(session, state, Usage(input_tokens=5_000), PromptSize(5_000, 500))
    assert state.ineffective_strikes == 0 and "awaiting_usage_check" not in state.extra


async def test_secrets_never_reach_the_summarizer(
    engine: ContextCompressor, summarizer: ScriptedSummarizer, store: InMemoryStore, session: AgentSession
) -> None:
    messages = conversation(20, **LONG)
    key = "sk-ant-api03-" + "A1b2C3d4" * 6
    messages[3] = ChatMessage.user(f"my key is {key} and password=hunter22")
    messages[-4] = ChatMessage.user("and the bot token is 123456789:" + "B" * 35)  # a recent request
    await persist(store, session.id, messages)
    await compact(engine, store, session, trigger="in_loop")
    prompt = summarizer.prompt()
    assert key not in prompt and "hunter22" not in prompt and "[REDACTED]" in prompt
    assert "B" * 35 not in prompt


async def test_summary_usage_is_recorded(
    engine: ContextCompressor, store: InMemoryStore, session: AgentSession
) -> None:
    await persist(store, session.id, conversation(20, **LONG))
    result = await compact(engine, store, session, trigger="in_loop")
    records = store.usage[session.id]
    assert [r.purpose for r in records] == ["summary"]
    assert records[0].usage.input_tokens == 1000 and records[0].cost_usd > 0
    assert result.outcome.summary_usage == tuple(records)


async def test_compress_never_mutates_its_input(engine: ContextCompressor, session: AgentSession) -> None:
    messages = numbered(conversation(20, **LONG))
    snapshot = copy.deepcopy(messages)
    await engine.compress(session, messages, ContextState(), trigger="in_loop", prompt_tokens=12_000)
    assert messages == snapshot
