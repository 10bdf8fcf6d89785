"""Session hygiene: the 85% check on persisted history, before the agent's first call."""

from __future__ import annotations

import asyncio
import inspect
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from agent.clock import utcnow
from agent.compaction import compact
from agent.loop_request import estimate_request_tokens
from agent.tokens import estimate_messages_tokens
from agent.types import AgentSession, ChatMessage, ContextState
from gateway.serving.hygiene import SUMMARIZING_NOTICE, cooldown_for, run_hygiene
from gateway.store.repository import Store
from tests.fakes.anthropic import Answer
from tests.gateway.conftest import Rig, gateway_rig, is_summarizer_call

WINDOW = 8000
FILLER = "the quick brown fox jumps over the lazy dog while the band plays on " * 6  # ~400 chars
LONG_PASTES = {"max_inbound_chars": 120_000}  # a pasted document arrives whole
DOCUMENT = "please read this document:\n" + ("lorem ipsum dolor sit amet, consectetur " * 2600)[:100_000]


async def _session(rig: Rig, key: str = "test:dm:chat-1") -> AgentSession:
    info = await rig.store.get_or_create_session(
        key,
        platform="test",
        chat_id="chat-1",
        system_prompt=rig.settings.sessions.system_prompt,
        model=rig.settings.model,
    )
    return rig.directory.agent_session(info)


async def _fill(rig: Rig, session: AgentSession, count: int, chars: int = 400) -> None:
    for i in range(count):
        role_message = ChatMessage.user if i % 2 == 0 else ChatMessage.assistant
        await rig.store.append_message(session.id, role_message(f"{i}: {FILLER[:chars]}"))


async def _set_real_count(rig: Rig, session: AgentSession, tokens: int) -> None:
    """Pretend the API just counted the stored history as ``tokens`` (so the estimate is exactly that)."""
    state = await rig.store.load_context_state(session.id)
    state.last_prompt_tokens = tokens
    state.last_prompt_estimate = estimate_messages_tokens(await rig.store.load_active(session.id))
    state.token_scale_model = session.model
    await rig.store.save_context_state(session.id, state)


async def _hygiene(rig: Rig, session: AgentSession, now: datetime | None = None):  # type: ignore[no-untyped-def]
    return await run_hygiene(
        rig.engine,
        rig.store,
        session,
        rig.settings.compression,
        tools=rig.agent.tools.definitions(),
        clock=(lambda: now) if now else (utcnow),
    )


async def test_overnight_ambient_growth_is_compacted_before_the_first_model_call(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        for i in range(90):  # ~90 x 110 tokens of group chatter, nobody talking to the bot
            await rig.say(f"{i} {FILLER}", chat_type="group", addressed=False, user_name=f"P{i % 5}")
        await rig.settle()
        session = await _session(rig, "test:group:chat-1")
        history = await rig.store.load_active(session.id)
        state = await rig.store.load_context_state(session.id)
        assert (
            estimate_request_tokens(session, history, rig.agent.tools.definitions(), state) >= 0.85 * WINDOW
        )
        assert rig.fake.requests == []

        await rig.say("@bot what did I miss?", chat_type="group")
        await rig.settle()

        bodies = rig.fake.message_requests
        assert is_summarizer_call(bodies[0])  # the compaction came first
        first_chat = next(b for b in bodies if not is_summarizer_call(b))
        assert rig.fake.count_tokens(first_chat) < 0.85 * WINDOW
        compactions = await rig.store.list_compactions(session.id)
        assert compactions[0].trigger == "hygiene"
        assert rig.adapter.texts == ["reply: @bot what did I miss?"]
        active, archived = await rig.store.message_counts(session.id)
        assert archived > 0 and active + archived >= 92


async def test_fewer_than_four_messages_never_fire_even_when_huge(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        session = await _session(rig)
        await _fill(rig, session, 3, chars=400)
        await _set_real_count(rig, session, WINDOW)

        report = await _hygiene(rig, session)

        assert report.status == "too_few"
        assert rig.fake.requests == []


async def test_84_percent_does_not_fire_and_85_percent_does(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        session = await _session(rig)
        await _fill(rig, session, 40)
        await _set_real_count(rig, session, int(0.84 * WINDOW))
        below = await _hygiene(rig, session)
        assert below.status == "below"
        assert rig.fake.requests == []

        await _set_real_count(rig, session, int(0.85 * WINDOW))
        fired = await _hygiene(rig, session)
        assert fired.status == "compacted"
        assert len(await rig.store.list_compactions(session.id)) == 1


async def test_the_estimate_adds_what_arrived_since_the_last_real_count(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        session = await _session(rig)
        await _fill(rig, session, 10)
        await _set_real_count(rig, session, int(0.80 * WINDOW))
        await _fill(rig, session, 8)  # ~8 x 100 tokens more: now over 85%

        report = await _hygiene(rig, session)

        assert report.estimate > int(0.85 * WINDOW)
        assert report.status == "compacted"


async def test_a_summarizer_failure_leaves_the_history_byte_identical_and_sets_the_cooldown(
    store: Store,
) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        session = await _session(rig)
        await _fill(rig, session, 40)
        await _set_real_count(rig, session, int(0.9 * WINDOW))
        before = await rig.store.load_active(session.id)
        now = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)
        rig.fake.fail_next(403, "permission_error", "summarizer refused")

        report = await _hygiene(rig, session, now)

        assert report.status == "failed"
        after = await rig.store.load_active(session.id)
        assert [(m.id, m.seq, m.role, m.kind, m.content, m.active) for m in after] == [
            (m.id, m.seq, m.role, m.kind, m.content, m.active) for m in before
        ]
        assert await rig.store.list_compactions(session.id) == []
        state = await rig.store.load_context_state(session.id)
        assert state.hygiene_failures == 1
        assert state.hygiene_cooldown_until == now + timedelta(minutes=5)

        # During the cooldown the check does not try again (no request reaches the fake).
        calls = len(rig.fake.requests)
        again = await _hygiene(rig, session, now + timedelta(minutes=4))
        assert again.status == "cooldown" and len(rig.fake.requests) == calls


async def test_a_summarizer_outage_with_room_left_waits_for_a_real_summary(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        session = await _session(rig)
        await _fill(rig, session, 40)
        await _set_real_count(rig, session, int(0.9 * WINDOW))
        before = await rig.store.load_active(session.id)
        rig.fake.fail_next(529, "overloaded_error", "Overloaded")

        report = await _hygiene(rig, session)

        assert report.status == "failed"
        assert await rig.store.load_active(session.id) == before
        assert (await rig.store.load_context_state(session.id)).hygiene_failures == 1


async def test_a_summarizer_outage_at_the_edge_of_the_window_shrinks_with_the_extractive_fallback(
    store: Store,
) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        session = await _session(rig)
        await _fill(rig, session, 40)
        await _set_real_count(rig, session, int(0.97 * WINDOW))
        rig.fake.fail_next(529, "overloaded_error", "Overloaded")

        report = await _hygiene(rig, session)

        assert report.status == "compacted"
        [record] = await rig.store.list_compactions(session.id)
        assert record.status == "fallback"


async def test_the_deployers_higher_threshold_wins_over_the_hygiene_default(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW, compression={"threshold": 0.9}) as rig:
        session = await _session(rig)
        await _fill(rig, session, 40)
        await _set_real_count(rig, session, int(0.87 * WINDOW))
        below = await _hygiene(rig, session)
        assert below.status == "below" and below.limit == int(0.9 * WINDOW)
        assert rig.fake.requests == []

        await _set_real_count(rig, session, int(0.9 * WINDOW))
        assert (await _hygiene(rig, session)).status == "compacted"


async def test_a_store_error_while_compacting_is_a_strike_not_a_retry_loop(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        session = await _session(rig)
        await _fill(rig, session, 40)
        await compact(rig.engine, rig.store, session, trigger="manual")
        await _fill(rig, session, 30)
        await _set_real_count(rig, session, int(0.9 * WINDOW))
        summarize = rig.fake.responder
        assert summarize is not None

        async def restore_meanwhile(body: dict[str, Any]) -> Answer:
            # An admin undoes the earlier compaction while the summarizer works: the plan now
            # names a summary that is no longer active, and the store refuses it.
            await rig.store.restore_latest_compaction(session.id)
            rig.fake.responder = summarize
            answer = summarize(body)
            return await answer if inspect.isawaitable(answer) else answer

        rig.fake.responder = restore_meanwhile
        now = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)
        report = await _hygiene(rig, session, now)

        assert report.status == "failed" and report.error is not None
        state = await rig.store.load_context_state(session.id)
        assert state.hygiene_failures == 1 and state.hygiene_cooldown_until == now + timedelta(minutes=5)
        calls = len(rig.fake.requests)
        assert (await _hygiene(rig, session, now + timedelta(minutes=1))).status == "cooldown"
        assert len(rig.fake.requests) == calls


def test_the_cooldown_ladder_is_5_15_45_minutes_then_an_hour() -> None:
    assert [cooldown_for(n) for n in (1, 2, 3, 4, 9)] == [
        timedelta(minutes=5),
        timedelta(minutes=15),
        timedelta(minutes=45),
        timedelta(hours=1),
        timedelta(hours=1),
    ]


async def test_the_cooldown_survives_a_restart(store: Store) -> None:
    now = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)
    async with gateway_rig(store, context_window=WINDOW) as rig:
        session = await _session(rig)
        await _fill(rig, session, 40)
        await _set_real_count(rig, session, int(0.9 * WINDOW))
        rig.fake.fail_next(403, "permission_error", "summarizer refused")
        await _hygiene(rig, session, now)
    async with gateway_rig(store, context_window=WINDOW) as rig:
        report = await _hygiene(rig, session, now + timedelta(minutes=1))
        assert report.status == "cooldown"
        assert rig.fake.requests == []


async def test_a_compaction_that_cannot_get_under_the_threshold_is_a_strike_not_a_retry(store: Store) -> None:
    # Five huge messages: the protected head and tail alone are over the threshold.
    async with gateway_rig(store, context_window=WINDOW) as rig:
        session = await _session(rig)
        for i in range(5):
            role_message = ChatMessage.user if i % 2 == 0 else ChatMessage.assistant
            await rig.store.append_message(session.id, role_message(f"{i}: " + "word " * 1800))

        first = await _hygiene(rig, session)
        second = await _hygiene(rig, session)

        assert first.status in ("failed", "ineffective")
        assert second.status == "cooldown"
        state = await rig.store.load_context_state(session.id)
        assert state.hygiene_failures == 1 and state.hygiene_cooldown_until is not None


async def test_no_compaction_loop_over_50_turns_near_the_threshold(store: Store) -> None:
    # Both thresholds at 90%: hygiene, which runs first, is what keeps this session in shape.
    async with gateway_rig(store, context_window=WINDOW, compression={"threshold": 0.9}) as rig:
        session = await _session(rig)
        tools = rig.agent.tools.definitions()
        while estimate_request_tokens(
            session, await rig.store.load_active(session.id), tools, ContextState()
        ) < int(0.9 * WINDOW):  # just over 90% of the window before the first turn
            await _fill(rig, session, 1)
        hygiene_turns: list[int] = []
        for turn in range(50):
            before = len(await rig.store.list_compactions(session.id))
            await rig.say(f"turn {turn}: {FILLER[:200]}")
            await rig.settle()
            compactions = await rig.store.list_compactions(session.id)
            if any(c.trigger == "hygiene" for c in compactions[before:]):
                hygiene_turns.append(turn)

        assert len(rig.adapter.texts) == 50
        assert hygiene_turns and hygiene_turns[0] == 0
        # Never two turns in a row, and rare: a compaction buys many turns of room.
        assert all(b - a > 1 for a, b in itertools.pairwise(hygiene_turns))
        assert len(hygiene_turns) <= 5
        assert all(rig.fake.count_tokens(b) <= WINDOW for b in rig.fake.message_requests)


async def _three_small_turns(rig: Rig) -> None:
    for text in ("hello", "what can you do?", "thanks, one moment"):
        await rig.say(text)
        await rig.settle()


async def test_a_pasted_document_at_15_percent_is_compacted_by_nothing(store: Store) -> None:
    async with gateway_rig(store, context_window=200_000, sessions=LONG_PASTES) as rig:
        await _three_small_turns(rig)
        await rig.say(DOCUMENT)
        await rig.settle()

        real = rig.fake.count_tokens(rig.responder.chat_bodies[-1])
        assert 0.12 * 200_000 <= real <= 0.18 * 200_000
        assert await rig.store.list_compactions(await rig.session_id()) == []
        assert rig.responder.summary_bodies == []


async def test_hygiene_estimates_a_pasted_document_at_its_real_size(store: Store) -> None:
    async with gateway_rig(store, context_window=200_000) as rig:
        await _three_small_turns(rig)
        session = await _session(rig)
        await rig.store.append_message(session.id, ChatMessage.user(DOCUMENT))

        report = await _hygiene(rig, session)
        await rig.agent.run_turn(session)

        real = rig.fake.count_tokens(rig.responder.chat_bodies[-1])
        assert report.status == "below"
        assert 0.9 * real <= report.estimate <= 1.1 * real


async def test_a_pasted_document_at_55_percent_is_compacted_in_the_loop_not_by_hygiene(store: Store) -> None:
    async with gateway_rig(store, context_window=50_000, sessions=LONG_PASTES) as rig:
        await _three_small_turns(rig)
        await rig.say(DOCUMENT)
        await rig.settle()

        compactions = await rig.store.list_compactions(await rig.session_id())
        assert [c.trigger for c in compactions] == ["in_loop"]
        assert 0.50 * 50_000 <= compactions[0].tokens_before <= 0.60 * 50_000


def _slow_summaries(rig: Rig, seconds: float, typing_seen: list[int]) -> None:
    """The summarizer takes ``seconds``; notes how often typing was shown when it was asked."""
    respond = rig.fake.responder
    assert respond is not None

    async def slow(body: dict[str, Any]) -> Answer:
        if is_summarizer_call(body):
            typing_seen.append(rig.adapter.typing)
            await asyncio.sleep(seconds)
        answer = respond(body)
        return await answer if inspect.isawaitable(answer) else answer

    rig.fake.responder = slow


async def test_a_slow_hygiene_compaction_shows_typing_and_one_summarizing_notice(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW, sessions={"summarizing_notice_seconds": 0.2}) as rig:
        session = await _session(rig)
        await _fill(rig, session, 40)
        await _set_real_count(rig, session, int(0.9 * WINDOW))
        typing_seen: list[int] = []
        _slow_summaries(rig, 0.8, typing_seen)

        await rig.say("are you there?")
        await rig.settle()

        assert typing_seen and typing_seen[0] >= 1  # typing while hygiene compacts
        assert rig.adapter.texts == [SUMMARIZING_NOTICE, "reply: are you there?"]
        assert [c.trigger for c in await rig.store.list_compactions(session.id)] == ["hygiene"]


async def test_a_slow_in_loop_compaction_sends_the_summarizing_notice(store: Store) -> None:
    async with gateway_rig(
        store, context_window=50_000, sessions={**LONG_PASTES, "summarizing_notice_seconds": 0.2}
    ) as rig:
        await _three_small_turns(rig)
        typing_seen: list[int] = []
        _slow_summaries(rig, 0.8, typing_seen)
        await rig.say(DOCUMENT)
        await rig.settle()

        compactions = await rig.store.list_compactions(await rig.session_id())
        assert [c.trigger for c in compactions] == ["in_loop"]
        assert rig.adapter.texts[3] == SUMMARIZING_NOTICE and len(rig.adapter.texts) == 5


async def test_a_quick_compaction_sends_no_summarizing_notice(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW, sessions={"summarizing_notice_seconds": 5}) as rig:
        session = await _session(rig)
        await _fill(rig, session, 40)
        await _set_real_count(rig, session, int(0.9 * WINDOW))
        await rig.say("are you there?")
        await rig.settle()

        assert rig.adapter.texts == ["reply: are you there?"]
        assert len(await rig.store.list_compactions(session.id)) == 1
