"""The plan validator every plan passes before the store applies it."""

from __future__ import annotations

from agent.context_plan import apply_plan, validate_plan, validate_projection
from agent.types import AgentSession, ChatMessage, CompactionPlan, ContextState, Insertion
from tests.agent.conftest import assistant, persist, tool_round, user
from tests.fakes.memory_store import InMemoryStore

SESSION = AgentSession(id="v", system_prompt="sys", model="claude-sonnet-4-6", context_window=2_000)


def plan(
    archive: tuple[int, ...], insertions: tuple[Insertion, ...] = (), strategy: str = "test"
) -> CompactionPlan:
    return CompactionPlan(
        trigger="in_loop",
        archive_ids=archive,
        insertions=insertions,
        first_kept_id=None,
        tokens_before=100,
        tokens_after=50,
        model="",
        duration_ms=0,
        strategy=strategy,
    )


async def view() -> list[ChatMessage]:
    return await persist(
        InMemoryStore(), "v", [user("one"), *tool_round(["out"]), assistant("a"), user("two"), assistant("b")]
    )


def ids(messages: list[ChatMessage]) -> tuple[int, ...]:
    return tuple(m.id for m in messages if m.id is not None)


async def test_archiving_a_whole_exchange_is_valid() -> None:
    v = await view()
    note = ChatMessage.user("[archived]", kind="summary")
    p = plan(ids(v[:4]), (Insertion(anchor_id=ids(v)[0], message=note),))
    assert validate_plan(SESSION, ContextState(), v, p) == []
    assert [m.text for m in apply_plan(v, p)] == ["[archived]", "two", "b"]


async def test_a_tool_use_without_its_result_is_refused() -> None:
    v = await view()
    problems = validate_plan(SESSION, ContextState(), v, plan((ids(v)[2],)))
    assert any("without tool_result" in p for p in problems)


async def test_dropping_the_latest_user_message_is_refused_except_for_a_snip() -> None:
    v = await view()
    latest = (ids(v)[4],)
    assert "the latest user message was dropped" in validate_plan(SESSION, ContextState(), v, plan(latest))
    assert validate_plan(SESSION, ContextState(), v, plan(latest, strategy="snip")) == []


async def test_a_view_over_the_window_is_refused() -> None:
    v = await view()
    huge = ChatMessage.user("x " * 20_000, kind="summary")
    p = plan(ids(v[:4]), (Insertion(anchor_id=ids(v)[0], message=huge),))
    assert any("over the window" in p for p in validate_plan(SESSION, ContextState(), v, p))


async def test_a_message_outside_the_view_is_refused() -> None:
    v = await view()
    assert validate_plan(SESSION, ContextState(), v, plan((9_999,)))


async def test_a_projection_must_keep_the_latest_user_message() -> None:
    v = await view()
    assert validate_projection(SESSION, ContextState(), v, v) == []
    assert "the latest user message was dropped" in validate_projection(SESSION, ContextState(), v, v[:4])
