"""The quiet-hours sweep: idle, well-filled sessions are compacted at night (trigger ``scheduled``)."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent.loop_request import estimate_request_tokens
from agent.types import AgentSession, ChatMessage
from gateway.config import SweepSettings
from gateway.jobs.setup import JobParts, build_jobs
from gateway.jobs.sweep import Sweep
from gateway.scheduling.runs import ClusterJobs
from gateway.store.repository import Store
from tests.fakes.anthropic import Answer, Responder
from tests.gateway.conftest import ChatResponder, Rig, gateway_rig, is_summarizer_call
from tests.store.engines import only

WINDOW = 8000
FILLER = "the quick brown fox jumps over the lazy dog while the band plays on " * 6  # ~400 chars
# A night after the test's real "now", so every session created now is long idle by then.
THREE_AM = (datetime.now(UTC) + timedelta(days=1)).replace(hour=3, minute=0, second=0, microsecond=0)
NOON = THREE_AM + timedelta(hours=9)


def sweep_of(rig: Rig, **settings: Any) -> Sweep:
    return Sweep(
        SweepSettings(**settings),
        timezone="UTC",
        store=rig.store,
        engine=rig.engine,
        directory=rig.directory,
        gateway=rig.gateway,
        tools=rig.agent.tools.definitions,
    )


def slow_summaries_of(
    marker: str, responder: ChatResponder, started: asyncio.Event, delay: float = 2.0
) -> Responder:
    """The rig's responder, but summarizing a conversation that mentions ``marker`` takes ``delay``
    (``started`` is set when such a summary begins)."""

    async def answer(body: dict[str, Any]) -> Answer:
        if is_summarizer_call(body) and marker in json.dumps(body):
            started.set()
            await asyncio.sleep(delay)
        return await responder(body)

    return answer


async def session_at(
    rig: Rig, chat: str, fill: float, *, marker: str = "", filler: str = FILLER
) -> AgentSession:
    """A DM session whose persisted context is about ``fill`` of its effective budget."""
    info = await rig.store.get_or_create_session(
        f"test:dm:{chat}",
        platform="test",
        chat_id=chat,
        system_prompt=rig.settings.sessions.system_prompt,
        model=rig.settings.model,
    )
    session = rig.directory.agent_session(info)
    i = 0
    while await fill_of(rig, session) < fill:
        for _ in range(4):  # measuring after every append would make this quadratic
            make = ChatMessage.user if i % 2 == 0 else ChatMessage.assistant
            await rig.store.append_message(session.id, make(f"{i}: {marker} {filler}"))
            i += 1
    return session


async def fill_of(rig: Rig, session: AgentSession) -> float:
    history = await rig.store.load_active(session.id)
    state = await rig.store.load_context_state(session.id)
    tokens = estimate_request_tokens(session, history, rig.agent.tools.definitions(), state)
    return tokens / session.budget_window


async def triggers(rig: Rig, session: AgentSession) -> list[str]:
    return [c.trigger for c in await rig.store.list_compactions(session.id)]


async def test_the_sweep_at_3am_compacts_only_the_idle_full_session_and_its_next_message_pays_nothing(
    store: Store,
) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        idle_full = await session_at(rig, "idle-full", 0.9)
        running = await session_at(rig, "running", 0.9, marker="RUNNING")
        small = await session_at(rig, "small", 0.4)
        cooling = await session_at(rig, "cooling", 0.9)
        state = await rig.store.load_context_state(cooling.id)
        state.hygiene_cooldown_until = THREE_AM + timedelta(minutes=20)
        await rig.store.save_context_state(cooling.id, state)
        # A turn in progress in "running": a message came in and its hygiene compaction is
        # waiting for the summarizer (slow for this session only).
        compacting = asyncio.Event()
        rig.fake.responder = slow_summaries_of("RUNNING", rig.responder, compacting)
        await rig.say("still there?", chat_id="running")
        await asyncio.wait_for(compacting.wait(), 10)
        sweep = sweep_of(rig)

        at_noon = await sweep.run(NOON)  # outside quiet hours: nothing is looked at
        at_three = await sweep.run(THREE_AM)

        assert at_noon == {"outside_quiet_hours": 1}
        assert at_three["compacted"] == 1 and at_three["below_fill"] == 1 and at_three["cooldown"] == 1
        assert await triggers(rig, idle_full) == ["scheduled"]
        assert await triggers(rig, small) == [] and await triggers(rig, cooling) == []
        await rig.settle()
        assert await triggers(rig, running) == ["hygiene"]  # its own turn's, never the sweep's

        requests_before = len(rig.fake.message_requests)
        await rig.say("good morning, what did we decide?", chat_id="idle-full")
        await rig.settle()

        assert await triggers(rig, idle_full) == ["scheduled"]  # no hygiene, no in-loop compaction
        morning = rig.fake.message_requests[requests_before:]
        assert [is_summarizer_call(b) for b in morning] == [False]
        assert rig.adapter.texts[-1] == "reply: good morning, what did we decide?"


async def test_a_1m_window_session_is_swept_at_the_fill_of_the_default_budget(store: Store) -> None:
    async with gateway_rig(store, context_window=1_000_000) as rig:
        assert rig.settings.compression.budget_tokens == 200_000  # the default budget
        session = await session_at(rig, "million", 0.65, filler=FILLER * 40)
        assert session.context_window == 1_000_000 and session.budget_window == 200_000

        report = await sweep_of(rig).run(THREE_AM)

        assert report.get("compacted") == 1, report
        assert await triggers(rig, session) == ["scheduled"]


def jobs_of(rig: Rig) -> ClusterJobs:
    """The jobs ``hygieia run`` would schedule over the rig's parts."""
    parts = JobParts(rig.store, rig.gateway, rig.engine, rig.directory, rig.agent.tools.definitions)
    return build_jobs(rig.settings, parts)


def quiet_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """INFO and above from the scheduled jobs and the compaction they run."""
    wings = ("gateway.scheduling", "gateway.jobs", "agent.")
    return [r.getMessage() for r in caplog.records if r.name.startswith(wings) and r.levelno >= logging.INFO]


async def test_a_sweep_that_finds_nothing_to_compact_logs_nothing_at_info(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        await session_at(rig, "small", 0.4)
        jobs = jobs_of(rig)
        caplog.set_level(logging.INFO)

        by_night = await jobs.run_due("sweep", now=THREE_AM)
        by_day = await jobs.run_due("sweep", now=NOON)

    assert by_day is not None and by_day.result == {"outside_quiet_hours": 1}
    assert by_night is not None and by_night.result == {"looked": 1, "below_fill": 1}
    assert quiet_lines(caplog) == []


async def test_a_sweep_that_compacts_logs_what_it_did_at_info(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        await session_at(rig, "full", 0.9)
        jobs = jobs_of(rig)
        caplog.set_level(logging.INFO)

        await jobs.run_due("sweep", now=THREE_AM)

    lines = quiet_lines(caplog)
    assert any(line.startswith("sweep compacted a session at ") for line in lines), lines
    assert any(line.startswith("job sweep finished") and "compacted 1" in line for line in lines), lines


async def test_a_session_another_worker_is_serving_is_left_alone(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        busy = await session_at(rig, "busy", 0.9)
        await rig.store.inbox_put(
            platform="test",
            chat_id="busy",
            platform_message_id="elsewhere-1",
            session_key="test:dm:busy",
            payload={"text": "hi"},
            addressed=True,
        )
        claimed = await rig.store.inbox_claim(worker="other", lease_seconds=600, session_key="test:dm:busy")
        assert claimed

        report = await sweep_of(rig).run(THREE_AM)

        assert "compacted" not in report and await triggers(rig, busy) == []


async def test_without_the_sweep_the_same_first_message_waits_for_a_hygiene_compaction(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        idle_full = await session_at(rig, "idle-full", 0.9)

        await rig.say("good morning, what did we decide?", chat_id="idle-full")
        await rig.settle()

        assert await triggers(rig, idle_full) == ["hygiene"]
        assert is_summarizer_call(rig.fake.message_requests[0])


async def test_at_most_max_sessions_are_compacted_per_run_least_recently_active_first(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        sessions = [await session_at(rig, f"chat-{i}", 0.9) for i in range(3)]
        for minutes, session in zip((30, 90, 60), sessions, strict=True):
            await rig.store.touch_session(session.id, THREE_AM - timedelta(minutes=minutes))

        report = await sweep_of(rig, max_sessions=2).run(THREE_AM)

        assert report["compacted"] == 2
        assert [await triggers(rig, s) for s in sessions] == [[], ["scheduled"], ["scheduled"]]


async def test_a_session_active_more_recently_than_idle_minutes_is_left_alone(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        recent = await session_at(rig, "recent", 0.9)
        await rig.store.touch_session(recent.id, THREE_AM - timedelta(minutes=10))

        report = await sweep_of(rig, idle_minutes=30).run(THREE_AM)

        assert "compacted" not in report and await triggers(rig, recent) == []


async def test_an_open_summarizer_breaker_keeps_the_sweep_away(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        broken = await session_at(rig, "broken", 0.9)
        state = await rig.store.load_context_state(broken.id)
        state.consecutive_failures = rig.settings.compression.max_consecutive_failures
        state.cooldown_until = THREE_AM + timedelta(hours=1)  # open: its back-off is running
        await rig.store.save_context_state(broken.id, state)

        report = await sweep_of(rig).run(THREE_AM)

        assert report.get("cooldown") == 1 and await triggers(rig, broken) == []
        assert rig.responder.summary_bodies == []


async def test_a_session_measured_small_is_not_measured_again_until_it_changes(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        small = await session_at(rig, "small", 0.3)
        sweep = sweep_of(rig)

        first = await sweep.run(THREE_AM)
        second = await sweep.run(THREE_AM + timedelta(minutes=10))
        await rig.store.touch_session(small.id, THREE_AM - timedelta(hours=1))
        third = await sweep.run(THREE_AM + timedelta(minutes=20))

    assert (first.get("below_fill"), second.get("unchanged"), third.get("below_fill")) == (1, 1, 1)


@only("postgresql")
async def test_while_the_sweep_holds_a_session_no_worker_can_claim_its_messages(store: Store) -> None:
    key = "test:dm:guarded"
    await store.inbox_put(
        platform="test",
        chat_id="guarded",
        platform_message_id="m1",
        session_key=key,
        payload={"text": "hi"},
        addressed=True,
    )
    async with store.session_guard(key):
        claim = asyncio.create_task(store.inbox_claim(worker="other", lease_seconds=30, session_key=key))
        await asyncio.sleep(0.5)
        assert not claim.done()
    claimed = await asyncio.wait_for(claim, 10)
    assert [item.platform_message_id for item in claimed] == ["m1"]


@pytest.mark.parametrize("window", ["02:00-06:00", "22:00-04:00"])
async def test_the_sweep_does_nothing_outside_its_window(store: Store, window: str) -> None:
    async with gateway_rig(store, context_window=WINDOW) as rig:
        full = await session_at(rig, "full", 0.9)
        report = await sweep_of(rig, quiet_hours=window).run(NOON)
        assert report == {"outside_quiet_hours": 1} and await triggers(rig, full) == []
