"""Erasing a user's data: exactly their rows go, derived summaries are redacted, views stay valid."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from agent.transcript import validate_messages
from agent.types import ChatMessage, SearchFilters
from gateway.store.erase_ops import ERASED_NOTICE, EraseCounts
from gateway.store.models import inbox, memories, messages
from gateway.store.repository import Store
from tests.store.helpers import new_session, summary_plan

SECRET = "zanzibar"


async def said(store: Store, sid: str, who: str | None, text: str) -> ChatMessage:
    if who is None:
        return await store.append_message(sid, ChatMessage.assistant(text))
    return await store.append_message(sid, ChatMessage.user(text, author_id=who, author_name=who))


async def world(store: Store) -> dict[str, Any]:
    """A group where ann (the one to erase) and bob talk, compacted twice; ann's DM; bob's DM;
    a Discord user who happens to have ann's id."""
    group = await new_session(store, "telegram:group:-1", chat_id="-1")
    g = [
        await said(store, group, "bob", "bob opens the group"),
        await said(store, group, "ann", f"ann says {SECRET} one"),
        await said(store, group, None, "noted"),
        await said(store, group, "bob", "bob again"),
        await said(store, group, None, "ok"),
        await said(store, group, "ann", f"ann says {SECRET} two"),
        await said(store, group, None, "fine"),
    ]
    first = await store.archive_and_summarize(group, summary_plan(g[1:3], f"ann mentioned {SECRET}"))
    active = await store.load_active(group)
    summary = next(m for m in active if m.kind == "summary")
    second = await store.archive_and_summarize(group, summary_plan([summary, g[3]], "the group so far"))
    dm = await store.get_or_create_session(
        "telegram:dm:ann", platform="telegram", chat_id="ann", user_id="ann", system_prompt="s", model="m"
    )
    await said(store, dm.id, "ann", f"my {SECRET} secret")
    await said(store, dm.id, None, "I will keep it")
    bob_dm = await new_session(store, "telegram:dm:bob", chat_id="bob")
    b = [await said(store, bob_dm, "bob", f"bob's own {SECRET}"), await said(store, bob_dm, None, "sure")]
    await store.archive_and_summarize(bob_dm, summary_plan(b, f"bob said {SECRET}"))
    other = await new_session(store, "discord:dm:ann", platform="discord", chat_id="9")
    await said(store, other, "ann", f"a different ann on discord: {SECRET}")
    for platform, chat, user, n in (
        ("telegram", "-1", "ann", 1),
        ("telegram", "-1", "bob", 2),
        ("discord", "9", "ann", 3),
    ):
        await store.inbox_put(
            platform=platform,
            chat_id=chat,
            platform_message_id=str(n),
            session_key=f"{platform}:{chat}",
            payload={"text": "x", "user_id": user},
            addressed=True,
        )
    await store.memory_put("telegram:dm:ann", "/memories/ann.md", "ann likes tea")
    await store.memory_put("telegram:dm:bob", "/memories/bob.md", "bob likes coffee")
    return {"group": group, "dm": dm.id, "bob_dm": bob_dm, "other": other, "compactions": (first, second)}


async def all_rows(store: Store) -> dict[int, dict[str, Any]]:
    async with store.db.transaction(write=False) as s:
        rows = (await s.execute(select(messages))).mappings().all()
    return {int(r["id"]): {k: v for k, v in r.items() if k != "text_tsv"} for r in rows}


async def test_erase_removes_exactly_the_users_messages_and_redacts_what_was_made_from_them(
    store: Store,
) -> None:
    w = await world(store)
    before = await all_rows(store)
    ann = {i for i, r in before.items() if r["author_id"] == "ann" and r["session_id"] != w["other"]}
    preview = await store.erase_preview("telegram", "ann")
    counts = await store.erase_user("telegram", "ann")
    assert counts == EraseCounts(messages=3, sessions=2, summaries_redacted=2, inbox=1, memories=1, notices=1)
    assert counts.focus_texts == 0  # none of these compactions had a focus
    assert preview == EraseCounts(messages=3, sessions=2, summaries_redacted=2, inbox=1, memories=1)
    after = await all_rows(store)

    assert set(before) - set(after) == ann
    redacted = {i for i in set(after) & set(before) if after[i] != before[i]}
    assert all(before[i]["kind"] == "summary" and before[i]["session_id"] == w["group"] for i in redacted)
    assert len(redacted) == 2
    for i in redacted:
        assert SECRET not in after[i]["text"] and "erased at a user's request" in after[i]["text"]
    [notice] = [r for i, r in after.items() if i not in before]
    assert notice["session_id"] == w["dm"] and notice["kind"] == "notice" and ERASED_NOTICE in notice["text"]


async def test_after_erase_search_finds_only_what_others_wrote_and_views_stay_valid(store: Store) -> None:
    w = await world(store)
    await store.erase_user("telegram", "ann")
    hits = await store.search(SECRET, SearchFilters(), limit=50)
    assert {h.session_id for h in hits} == {w["bob_dm"], w["other"]}
    for sid in (w["group"], w["dm"], w["bob_dm"], w["other"]):
        active = await store.load_active(sid)
        assert not validate_messages(active), sid
    assert [m.text for m in await store.load_active(w["dm"])] == [ERASED_NOTICE, "I will keep it"]


async def test_erase_leaves_other_users_inbox_rows_and_memories(store: Store) -> None:
    await world(store)
    await store.erase_user("telegram", "ann")
    async with store.db.transaction(write=False) as s:
        left = {(r.platform, r.payload["user_id"]) for r in (await s.execute(select(inbox))).all()}
        scopes = set((await s.scalars(select(memories.c.scope))).all())
    assert left == {("telegram", "bob"), ("discord", "ann")}
    assert scopes == {"telegram:dm:bob"}


async def test_erasing_a_user_with_no_data_changes_nothing(store: Store) -> None:
    await world(store)
    before = await all_rows(store)
    assert await store.erase_user("telegram", "nobody") == EraseCounts()
    assert await all_rows(store) == before


async def test_erase_removes_the_reminders_of_the_users_own_chat_and_what_they_said(store: Store) -> None:
    from datetime import UTC, datetime

    from gateway.store.models import scheduled_tasks
    from gateway.store.task_ops import NewTask

    w = await world(store)
    now = datetime.now(UTC)

    def task(key: str, chat: str, sid: str) -> NewTask:
        return NewTask(key, "telegram", chat, None, sid, f"remind me of {SECRET}", "at", "x", "UTC", now)

    mine = await store.task_create(task("telegram:dm:ann", "ann", w["dm"]), now=now, max_active=5)
    bobs = await store.task_create(task("telegram:dm:bob", "bob", w["bob_dm"]), now=now, max_active=5)
    assert mine is not None and bobs is not None
    await store.append_message(
        w["dm"], ChatMessage.user(f"Scheduled task: {SECRET}", author_id=f"task:{mine.id}")
    )
    await store.inbox_put(
        platform="telegram",
        chat_id="ann",
        platform_message_id=f"task:{mine.id}:1",
        session_key="telegram:dm:ann",
        payload={"text": f"remind me of {SECRET}", "user_id": f"task:{mine.id}"},
        addressed=True,
    )

    counts = await store.erase_user("telegram", "ann")

    async with store.db.transaction(write=False) as s:
        left = set((await s.scalars(select(scheduled_tasks.c.id))).all())
        run_left = await s.scalar(select(messages.c.id).where(messages.c.author_id == f"task:{mine.id}"))
        runs_queued = await s.scalar(
            select(inbox.c.id).where(inbox.c.platform_message_id.startswith("task:"))
        )
    assert left == {bobs.id}
    assert run_left is None and runs_queued is None
    assert counts.tasks == 1
