"""Chat commands: stored in the inbox, answered by the gateway, never sent to the model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from agent.server_context import record_strategy_run
from agent.types import SearchFilters, StrategyRun
from gateway.serving.commands import parse_command, render_bars
from gateway.store.models import outbox
from gateway.store.repository import Store
from tests.gateway.conftest import Rig, gateway_rig, is_summarizer_call

WINDOW = 16_000
FILLER = "some words about the project plan and the budget for next quarter " * 5


async def _grow(rig: Rig, turns: int, **kw: object) -> None:
    for i in range(turns):
        await rig.say(f"message {i}: {FILLER}", **kw)
        await rig.settle()


@pytest.fixture
async def rig(store: Store) -> AsyncIterator[Rig]:
    # A small window, so that 30 exchanges leave something for /compact to archive.
    async with gateway_rig(store, context_window=WINDOW) as r:
        yield r


def test_only_known_commands_are_commands() -> None:
    assert parse_command("/compact the budget") is not None
    assert parse_command("/compact@HygieiaBot the budget") == parse_command("/compact the budget")
    assert parse_command("/unknown thing") is None
    assert parse_command("not /new") is None


async def test_a_command_is_stored_in_the_inbox_but_never_sent_to_the_model(rig: Rig) -> None:
    await rig.say("/help")
    await rig.settle()

    assert rig.fake.requests == []
    assert rig.adapter.texts[0].startswith("Commands:")
    assert (await rig.store.inbox_get(1)).status == "done"


async def test_new_ends_the_session_and_the_next_message_starts_a_fresh_one(rig: Rig) -> None:
    await rig.say("remember the number 7")
    await rig.settle()
    old = await rig.session_id()
    await rig.say("/new")
    await rig.say("hello again")
    await rig.settle()

    new = await rig.session_id()
    assert new != old
    ended = await rig.store.get_session(old)
    assert ended.end_reason == "new"
    assert [m.text for m in await rig.store.load_active(new)] == [
        "[Ann, 14:02 UTC] hello again",
        "reply: hello again",
    ]
    hits = await rig.store.search("number", SearchFilters())
    assert any(h.session_id == old for h in hits)


async def test_compact_honours_the_focus(rig: Rig) -> None:
    await _grow(rig, 30)
    await rig.say("/compact the budget")
    await rig.settle()

    summary_calls = [b for b in rig.fake.message_requests if is_summarizer_call(b)]
    assert summary_calls and "the budget" in str(summary_calls[-1]["messages"])
    [record] = await rig.store.list_compactions(await rig.session_id())
    assert record.trigger == "manual" and record.focus == "the budget"
    assert rig.adapter.texts[-1].startswith("Compacted ")


async def test_compact_is_allowed_during_the_hygiene_cooldown(rig: Rig) -> None:
    await _grow(rig, 30)
    session_id = await rig.session_id()
    state = await rig.store.load_context_state(session_id)
    state.hygiene_failures, state.cooldown_until = 3, None
    state.hygiene_cooldown_until = datetime(2099, 1, 1, tzinfo=UTC)
    await rig.store.save_context_state(session_id, state)

    await rig.say("/compact")
    await rig.settle()

    assert len(await rig.store.list_compactions(session_id)) == 1


async def test_context_draws_a_bar_chart_of_the_window(rig: Rig) -> None:
    await _grow(rig, 3)
    await rig.say("/context")
    await rig.settle()

    chart = rig.adapter.texts[-1]
    for part in ("system", "memory", "summary", "history", "tools", "free"):
        assert part in chart
    assert "█" in chart and "%" in chart


async def test_forget_sets_the_last_exchanges_aside_and_context_shows_the_strategy(rig: Rig) -> None:
    await _grow(rig, 4)
    session_id = await rig.session_id()
    before = await rig.store.load_active(session_id)
    await rig.say("/forget 2")
    await rig.settle()

    assert rig.adapter.texts[-1].startswith("Set aside 4 messages")
    after = await rig.store.load_active(session_id)
    assert [m.id for m in after if m.kind == "message"] == [m.id for m in before[:4]]
    [record] = await rig.store.list_compactions(session_id)
    assert (record.strategy, record.trigger, record.messages_archived) == ("snip", "manual", 4)
    hits = await rig.store.search("message 3", SearchFilters(session_id=session_id, state="archived"))
    assert hits

    await rig.say("/context")
    await rig.settle()
    chart = rig.adapter.texts[-1]
    assert f"Last strategy: snip (freed {record.tokens_freed:,} tokens)" in chart
    assert f"Freed by strategy: snip {record.tokens_freed:,} (1x)" in chart


async def test_context_shows_what_the_api_cleared(rig: Rig) -> None:
    await _grow(rig, 1)
    session_id = await rig.session_id()
    state = await rig.store.load_context_state(session_id)
    record_strategy_run(state, "server_clearing", 5000, last_cleared_tool_uses=4)
    record_strategy_run(state, "server_clearing", 6000, last_cleared_tool_uses=5)
    await rig.store.save_context_state(session_id, state)
    await rig.say("/context")
    await rig.settle()
    chart = rig.adapter.texts[-1]
    assert (
        "Cleared by the API (server_clearing): 6,000 tokens of 5 old tool results on the last call; "
        "11,000 tokens not sent over 2 calls." in chart
    )


async def test_context_counts_the_apis_clearing_as_a_strategy_run(rig: Rig) -> None:
    await _grow(rig, 1)
    session_id = await rig.session_id()
    await rig.store.record_strategy_run(session_id, StrategyRun("server_clearing", 5000))
    await rig.store.record_strategy_run(session_id, StrategyRun("server_clearing", 6000))
    await rig.say("/context")
    await rig.settle()
    chart = rig.adapter.texts[-1]
    assert "Last strategy: server_clearing (freed 6,000 tokens)" in chart
    assert "Freed by strategy: server_clearing 11,000 (2x)" in chart


async def test_forget_refuses_a_bad_count(rig: Rig) -> None:
    await _grow(rig, 1)
    await rig.say("/forget lots")
    await rig.settle()
    assert rig.adapter.texts[-1].startswith("How many exchanges?")


def test_the_bar_chart_rows_add_up_to_the_room() -> None:
    chart = render_bars([("system", 100), ("history", 300), ("free", 600)], 1000)
    assert "Context: 400 tokens (40.0%) of 1,000 tokens" in chart
    assert chart.count("\n") == 5


async def test_context_shares_are_of_the_budget_and_name_the_window(store: Store) -> None:
    async with gateway_rig(store, context_window=1_000_000) as rig:
        await rig.say("hello")
        await rig.say("/context")
        await rig.settle()

    text = rig.adapter.texts[-1]
    header = text.splitlines()[1]
    assert header.endswith("of the 200,000-token budget (window 1,000,000)"), header
    used = int(header.split()[1].replace(",", ""))
    free = next(line for line in text.splitlines() if line.startswith("free"))
    assert f"{200_000 - used:,}" in free and free.endswith(f"{100 * (200_000 - used) / 200_000:5.1f}%")
    assert "Compaction at 100,000 tokens during a turn (50%) and 170,000 before one (85%)" in text


async def test_usage_reports_tokens_cache_hit_rate_and_cost(rig: Rig) -> None:
    await _grow(rig, 3)
    await rig.say("/usage")
    await rig.settle()

    text = rig.adapter.texts[-1]
    assert "3 model calls" in text and "hit rate" in text and "$" in text


async def test_status_shows_model_age_counts_and_the_last_compaction(rig: Rig) -> None:
    await _grow(rig, 30)
    await rig.say("/compact")
    await rig.say("/status")
    await rig.settle()

    text = rig.adapter.texts[-1]
    assert rig.settings.model in text
    assert "archived" in text and "Compactions: 1" in text and "manual" in text


async def test_status_says_a_conversation_keeps_its_model_until_new_after_the_model_changed(
    store: Store,
) -> None:
    async with gateway_rig(store, model="claude-sonnet-4-6") as before:
        await before.say("hello")
        await before.settle()
    async with gateway_rig(store, model="claude-haiku-4-5") as after:
        for n, text in enumerate(("/status", "/new", "/status")):
            await after.say(text, message_id=f"later-{n}")  # the first rig's ids are taken
        await after.settle()
        kept, _, fresh = after.adapter.texts
    assert kept.startswith("Model: claude-sonnet-4-6 ")
    assert (
        "This conversation keeps claude-sonnet-4-6 until /new; a new one starts on claude-haiku-4-5" in kept
    )
    assert fresh.startswith("Model: claude-haiku-4-5 ") and "keeps" not in fresh


async def test_stop_cancels_the_running_turn(rig: Rig) -> None:
    rig.fake.delay = 2.0
    await rig.say("a slow question")
    await asyncio.sleep(0.3)
    await rig.say("/stop")
    await rig.settle(within=5)

    assert rig.adapter.texts == ["Stopped."]
    active = await rig.store.load_active(await rig.session_id())
    assert [m.role for m in active] == ["user"]  # the question stays; no half answer
    assert (await rig.store.inbox_get(1)).status == "done"


async def test_new_cancels_the_running_turn_and_starts_afresh(rig: Rig) -> None:
    """``/new`` takes effect at once, as ``/stop`` does: the old conversation's answer is not waited for."""
    rig.fake.delay = 2.0
    await rig.say("a slow question")
    await asyncio.sleep(0.3)
    old = await rig.session_id()
    loop = asyncio.get_running_loop()
    began = loop.time()
    await rig.say("/new")
    await rig.settle(within=5)

    assert loop.time() - began < 1.5  # the model's answer (2 s) was not waited for
    assert rig.adapter.texts == ["Started a new conversation. The previous one is kept and still searchable."]
    assert (await rig.store.get_session(old)).ended
    active = await rig.store.load_active(old)
    assert [m.role for m in active] == ["user"]  # the question stays; no half answer


async def test_stop_with_nothing_running_says_so(rig: Rig) -> None:
    await rig.say("/stop")
    await rig.settle()
    assert rig.adapter.texts == ["Nothing is running."]


async def test_admin_commands_are_refused_to_non_admins(store: Store) -> None:
    async with gateway_rig(store, admin_users=["test:boss"]) as rig:
        await rig.say("/restore")
        await rig.settle()
        assert rig.adapter.texts == ["/restore is for admins only."]


async def test_an_admin_can_undo_the_latest_compaction(store: Store) -> None:
    async with gateway_rig(store, context_window=WINDOW, admin_users=["test:boss"]) as rig:
        await _grow(rig, 30, user_id="boss")
        session_id = await rig.session_id()
        before = [m.id for m in await rig.store.load_active(session_id)]
        await rig.say("/compact", user_id="boss")
        await rig.say("/restore", user_id="boss")
        await rig.settle()

        assert rig.adapter.texts[-1].startswith("Undid the latest compaction")
        assert [m.id for m in await rig.store.load_active(session_id)] == before


async def test_commands_run_in_order_with_messages(rig: Rig) -> None:
    """A command that does not stop the turn (all but /stop and /new) waits for the answer in progress."""
    rig.fake.delay = 0.4
    await rig.say("first")
    await asyncio.sleep(0.1)
    await rig.say("/usage")
    await rig.say("second")
    await rig.settle()

    assert rig.adapter.texts[0] == "reply: first"
    assert "1 model call" in rig.adapter.texts[1]  # counted after the first answer, before the second
    assert rig.adapter.texts[2] == "reply: second"


async def test_an_erasure_redacts_the_focus_the_compact_confirmation_quotes(rig: Rig) -> None:
    await _grow(rig, 30)
    await rig.say("/compact the quetzalcoatl budget")
    await rig.settle()
    assert "quetzalcoatl" in rig.adapter.texts[-1]
    session_id = await rig.session_id()
    counts = await rig.store.erase_user("test", "u1")
    assert counts.focus_quotes == 1
    async with rig.store.db.transaction(write=False) as s:
        texts = list((await s.scalars(select(outbox.c.text).where(outbox.c.session_id == session_id))).all())
    assert texts and not any("quetzalcoatl" in t for t in texts)
    [confirmation] = [t for t in texts if t.startswith("Compacted ")]
    assert confirmation.endswith(", focused on a text erased at a user's request).")
    assert "reply: message 0" in " ".join(texts)  # the bot's other replies stay
