"""archive_and_summarize, restore and recall: soft archival in place, one transaction each."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import func, select

from agent.compaction import compact
from agent.engines.compressor.engine import ContextCompressor
from agent.errors import NotFound, StoreError
from agent.settings import CompressionSettings
from agent.types import AgentSession, ChatMessage, Insertion
from gateway.store.models import messages
from gateway.store.repository import Store
from tests.agent.conftest import ScriptedSummarizer, conversation
from tests.store.helpers import append_turns, ids, new_session, summary_plan


async def row_count(store: Store) -> int:
    async with store.db.transaction(write=False) as s:
        return int(await s.scalar(select(func.count()).select_from(messages)) or 0)


async def test_active_view_is_head_then_summary_then_tail(store: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 10)
    record = await store.archive_and_summarize(sid, summary_plan(msgs[2:7]))

    view = await store.load_active(sid)
    assert ids(view[:2]) == ids(msgs[:2])
    assert view[2].kind == "summary" and view[2].id == record.summary_message_id
    assert ids(view[3:]) == ids(msgs[7:])
    assert [m.text for m in view][2] == "summary of the middle"


async def test_archived_rows_keep_content_and_point_at_their_compaction(store: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 6)
    before = await row_count(store)
    record = await store.archive_and_summarize(sid, summary_plan(msgs[1:4]))

    for original in msgs[1:4]:
        assert original.id is not None
        stored = await store.get_message(original.id)
        assert stored.content == original.content
        assert (stored.active, stored.compacted, stored.compaction_id) == (False, True, record.id)
    assert await row_count(store) == before + 1  # nothing deleted; only the summary added
    assert (record.archived_from_seq, record.archived_to_seq, record.messages_archived) == (2, 4, 3)


async def test_compaction_record_is_listed_with_its_numbers(store: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 6)
    plan = replace(summary_plan(msgs[1:4], trigger="hygiene"), first_kept_id=msgs[4].id, focus="the plan")
    record = await store.archive_and_summarize(sid, plan)

    [listed] = await store.list_compactions(sid)
    assert listed == record
    assert (listed.trigger, listed.first_kept_id, listed.focus, listed.tokens_before) == (
        "hygiene",
        msgs[4].id,
        "the plan",
        1000,
    )
    assert (await store.get_session(sid)).compaction_count == 1


@contextmanager
def fail_on_summary_insert(store: Store) -> Iterator[None]:
    """Raise inside the transaction right after the archive UPDATE, when the summary is inserted."""

    def hook(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO MESSAGES"):
            raise RuntimeError("injected failure")

    store.db.listen("before_cursor_execute", hook)
    try:
        yield
    finally:
        store.db.unlisten("before_cursor_execute", hook)


async def test_failure_midway_leaves_the_previous_active_view(store: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 8)
    before_view, before_rows = await store.load_active(sid), await row_count(store)

    with fail_on_summary_insert(store), pytest.raises(RuntimeError, match="injected"):
        await store.archive_and_summarize(sid, summary_plan(msgs[2:6]))

    assert await store.load_active(sid) == before_view
    assert await row_count(store) == before_rows
    assert await store.list_compactions(sid) == []


async def test_plan_naming_a_foreign_message_changes_nothing(store: Store) -> None:
    sid, other = await new_session(store, "a"), await new_session(store, "b")
    msgs = await append_turns(store, sid, 5)
    stranger = (await append_turns(store, other, 1))[0]
    before = await store.load_active(sid)
    plan = summary_plan(msgs[1:3])
    assert stranger.id is not None
    plan = replace(plan, archive_ids=(*plan.archive_ids, stranger.id))

    with pytest.raises(StoreError, match="not in session"):
        await store.archive_and_summarize(sid, plan)
    assert await store.load_active(sid) == before
    assert await store.list_compactions(sid) == []


async def test_plan_naming_an_archived_message_changes_nothing(store: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 6)
    await store.archive_and_summarize(sid, summary_plan(msgs[1:3]))
    before = await store.load_active(sid)

    with pytest.raises(StoreError, match="not in the active view"):
        await store.archive_and_summarize(sid, summary_plan(msgs[2:5]))
    assert await store.load_active(sid) == before


async def test_message_appended_during_compaction_stays_active_after_the_summary(store: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 6)
    plan = summary_plan(msgs[:4])  # planned from the view as it was
    late = await store.append_message(sid, ChatMessage.user("arrived while summarizing"))
    await store.archive_and_summarize(sid, plan)

    view = await store.load_active(sid)
    assert view[0].kind == "summary"
    assert ids(view[1:]) == [*ids(msgs[4:]), late.id]


async def test_recompaction_archives_the_previous_summary(store: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 10)
    first = await store.archive_and_summarize(sid, summary_plan(msgs[1:5], "first summary"))
    view = await store.load_active(sid)  # head, summary1, msgs[5:]
    second = await store.archive_and_summarize(sid, summary_plan(view[1:4], "second summary"))

    old_summary = await store.get_message(first.summary_message_id or 0)
    assert (old_summary.active, old_summary.compacted, old_summary.compaction_id) == (False, True, second.id)
    after = await store.load_active(sid)
    assert [m.text for m in after if m.kind == "summary"] == ["second summary"]
    assert ids(after) == [msgs[0].id, second.summary_message_id, *ids(msgs[7:])]


async def test_restore_undoes_exactly_the_latest_compaction(store: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 10)
    await store.archive_and_summarize(sid, summary_plan(msgs[1:4], "first"))
    view_after_first = await store.load_active(sid)
    second = await store.archive_and_summarize(sid, summary_plan(view_after_first[3:6], "second"))

    restored = await store.restore_latest_compaction(sid)

    assert restored.id == second.id and restored.restored_at is not None
    assert ids(await store.load_active(sid)) == ids(view_after_first)
    retired = await store.get_message(second.summary_message_id or 0)
    assert (retired.active, retired.compacted) == (False, False)
    [c1, c2] = await store.list_compactions(sid)
    assert c1.restored_at is None and c2.restored_at is not None


async def test_restoring_every_compaction_gives_back_the_original_view(store: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 8)
    await store.archive_and_summarize(sid, summary_plan(msgs[0:3]))
    view = await store.load_active(sid)
    await store.archive_and_summarize(sid, summary_plan(view[0:3]))
    await store.restore_latest_compaction(sid)
    await store.restore_latest_compaction(sid)

    assert ids(await store.load_active(sid)) == ids(msgs)
    with pytest.raises(NotFound):
        await store.restore_latest_compaction(sid)


async def test_insertions_on_one_anchor_keep_plan_order(store: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 5)
    assert msgs[1].id is not None
    plan = replace(
        summary_plan(msgs[1:3]),
        insertions=(
            Insertion(msgs[1].id, ChatMessage.user("summary", kind="summary")),
            Insertion(msgs[1].id, ChatMessage.assistant("noted", kind="notice")),
        ),
    )
    await store.archive_and_summarize(sid, plan)
    assert [m.text for m in await store.load_active(sid)] == [
        "message 0",
        "summary",
        "noted",
        "message 3",
        "message 4",
    ]


async def test_recall_pages_archived_messages_in_order(store: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 12)
    record = await store.archive_and_summarize(sid, summary_plan(msgs[1:8]))

    first = await store.recall(sid, compaction_id=record.id, limit=4)
    second = await store.recall(sid, compaction_id=record.id, offset=first.next_offset or 0, limit=4)
    assert (first.total, first.next_offset, second.next_offset) == (7, 4, None)
    assert ids(first.messages + second.messages) == ids(msgs[1:8])
    by_range = await store.recall(sid, from_id=msgs[3].id, to_id=msgs[5].id)
    assert ids(by_range.messages) == ids(msgs[3:6])


async def test_messages_after_returns_every_state(store: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 6)
    record = await store.archive_and_summarize(sid, summary_plan(msgs[2:4]))
    after = await store.messages_after(sid, 2)
    assert [m.id for m in after] == [
        msgs[2].id,
        record.summary_message_id,
        msgs[3].id,
        msgs[4].id,
        msgs[5].id,
    ]


async def test_a_compaction_that_prunes_a_message_with_a_platform_id_is_stored(store: Store) -> None:
    # The pruned copy must not repeat the original's platform message id (unique per session).
    sid = await new_session(store)
    session = AgentSession(id=sid, system_prompt="sys", model="claude-sonnet-4-6", context_window=20_000)
    stored = [
        await store.append_message(sid, replace(m, platform_message_id="tg:77") if i == 2 else m)
        for i, m in enumerate(conversation(12, output_chars=3000, words=40))
    ]
    engine = ContextCompressor(CompressionSettings(protect_last_n=4), ScriptedSummarizer(), summary_model="m")

    result = await compact(engine, store, session, trigger="in_loop")

    assert result.record is not None
    assert [m.id for m in await store.load_active(sid) if m.platform_message_id] == []
    assert stored[2].id is not None
    assert (await store.get_message(stored[2].id)).platform_message_id == "tg:77"  # the archived original
