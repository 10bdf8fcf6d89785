"""Small builders shared by the store tests."""

from __future__ import annotations

from agent.types import ChatMessage, CompactionPlan, Insertion, Role, Trigger
from gateway.store.repository import Store


async def new_session(
    store: Store, key: str = "telegram:1", *, platform: str = "telegram", chat_id: str = "1"
) -> str:
    info = await store.get_or_create_session(
        key, platform=platform, chat_id=chat_id, system_prompt="You are helpful.", model="claude-test"
    )
    return info.id


async def append_turns(
    store: Store, session_id: str, count: int, *, prefix: str = "message"
) -> list[ChatMessage]:
    out = []
    for i in range(count):
        role: Role = "user" if i % 2 == 0 else "assistant"
        out.append(
            await store.append_message(
                session_id, ChatMessage(role=role, content=[{"type": "text", "text": f"{prefix} {i}"}])
            )
        )
    return out


def summary_plan(
    archive: list[ChatMessage], text: str = "summary of the middle", *, trigger: Trigger = "manual"
) -> CompactionPlan:
    """Archive ``archive`` and put one summary where it was (anchored on its first message)."""
    assert archive and archive[0].id is not None
    summary = ChatMessage(role="user", content=[{"type": "text", "text": text}], kind="summary")
    return CompactionPlan(
        trigger=trigger,
        archive_ids=tuple(m.id for m in archive if m.id is not None),
        insertions=(Insertion(anchor_id=archive[0].id, message=summary),),
        first_kept_id=None,
        tokens_before=1000,
        tokens_after=200,
        model="claude-summary",
        duration_ms=5,
    )


def ids(messages: list[ChatMessage]) -> list[int]:
    return [m.id for m in messages if m.id is not None]
