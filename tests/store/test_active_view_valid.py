"""The real compressor on the real SQL store: whatever the conversation and wherever the
compactions fall, the stored active view is always a valid Messages API transcript, the
latest user message survives verbatim, and nothing appended is ever lost."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.compaction import compact
from agent.engines.compressor.engine import ContextCompressor
from agent.offline import OfflineProvider
from agent.settings import CompressionSettings
from agent.transcript import validate_messages
from agent.types import AgentSession, ChatMessage, Trigger
from gateway.store.repository import Store
from tests.store.engines import only
from tests.store.helpers import new_session

# One step of a conversation: a plain exchange, a tool round of n calls with big outputs,
# ambient chatter (consecutive user messages), or a compaction with some trigger.
Step = tuple[str, int]
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("exchange"), st.integers(50, 1500)),
        st.tuples(st.just("tools"), st.integers(1, 3)),
        st.tuples(st.just("chatter"), st.integers(1, 4)),
        st.tuples(st.just("compact"), st.sampled_from(range(4))),
    ),
    min_size=3,
    max_size=25,
)
TRIGGERS: tuple[Trigger, ...] = ("in_loop", "hygiene", "manual", "reactive")
_ids = itertools.count()


def _tool_round(calls: int) -> list[ChatMessage]:
    ids = [f"toolu_{next(_ids)}" for _ in range(calls)]
    uses = [{"type": "tool_use", "id": i, "name": "fetch", "input": {"url": f"https://x/{i}"}} for i in ids]
    results = [{"type": "tool_result", "tool_use_id": i, "content": "data " * 400} for i in ids]
    return [ChatMessage(role="assistant", content=uses), ChatMessage(role="user", content=results)]


async def _run(store: Store, steps: list[Step]) -> None:
    sid = await new_session(store, f"valid:{next(_ids)}")
    session = AgentSession(id=sid, system_prompt="You help.", model="claude-sonnet-4-6", context_window=6_000)
    engine = ContextCompressor(
        CompressionSettings(protect_last_n=4), OfflineProvider(), summary_model="claude-haiku-4-5"
    )
    appended: list[int] = []
    latest_user: str | None = None

    async def add(message: ChatMessage) -> None:
        stored = await store.append_message(sid, message)
        assert stored.id is not None
        appended.append(stored.id)

    await add(ChatMessage.user("first question"))
    latest_user = "first question"
    await add(ChatMessage.assistant("first answer"))
    for kind, n in steps:
        if kind == "exchange":
            latest_user = f"question {len(appended)} " + "w" * n
            await add(ChatMessage.user(latest_user))
            await add(ChatMessage.assistant("answer " + "a" * n))
        elif kind == "tools":
            for message in _tool_round(n):
                await add(message)
            await add(ChatMessage.assistant("done with the tools"))
        elif kind == "chatter":
            for i in range(n):
                latest_user = f"chatter {len(appended)}.{i}"
                await add(ChatMessage.user(latest_user))
            await add(ChatMessage.assistant("noted"))
        else:
            await compact(engine, store, session, trigger=TRIGGERS[n])
        view = await store.load_active(sid)
        assert validate_messages(view) == [], [m.role for m in view]
        assert latest_user in [m.text for m in view if m.role == "user" and m.kind == "message"]
    for message_id in appended:  # never deleted: every row is still there, active or archived
        await store.get_message(message_id)


HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@only("sqlite")
@settings(max_examples=20, deadline=None, suppress_health_check=HEALTH)
@given(steps=STEPS)
async def test_the_active_view_stays_valid_for_the_api_sqlite(store: Store, steps: list[Step]) -> None:
    await _run(store, steps)


@only("postgresql")
@settings(max_examples=6, deadline=None, suppress_health_check=HEALTH)
@given(steps=STEPS)
async def test_the_active_view_stays_valid_for_the_api_postgres(store: Store, steps: list[Step]) -> None:
    await _run(store, steps)
