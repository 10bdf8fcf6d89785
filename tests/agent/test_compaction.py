"""compact(): the one operation every trigger uses, over the in-memory store's semantics."""

from __future__ import annotations

from agent.compaction import compact
from agent.engines.compressor.engine import ContextCompressor
from agent.errors import Overloaded
from agent.settings import CompressionSettings
from agent.types import AgentSession, ChatMessage, ContextState, SearchFilters, snippet_parts
from tests.agent.conftest import ScriptedSummarizer, conversation, persist
from tests.fakes.memory_store import InMemoryStore


async def test_compact_archives_middle_and_places_summary_where_it_was(
    engine: ContextCompressor, store: InMemoryStore, session: AgentSession
) -> None:
    stored = await persist(store, session.id, conversation(20, words=400))
    result = await compact(engine, store, session, trigger="manual", focus="the files")
    assert (
        result.record is not None and result.record.trigger == "manual" and result.record.focus == "the files"
    )
    summary = next(m for m in result.messages if m.kind == "summary")
    assert result.record.summary_message_id == summary.id
    archived_ids = {m.id for m in stored} - {m.id for m in result.messages}
    assert result.record.messages_archived == len(archived_ids)
    assert summary.seq == min(m.seq or 0 for m in stored if m.id in archived_ids)
    assert result.messages == await store.load_active(session.id)
    everything = store.all_messages(session.id)
    assert len(everything) == len(stored) + 1  # nothing deleted
    assert result.record.first_kept_id == result.messages[result.messages.index(summary) + 1].id


async def test_message_appended_during_compaction_stays_after_summary(
    engine: ContextCompressor, store: InMemoryStore, session: AgentSession
) -> None:
    stored = await persist(store, session.id, conversation(20, words=400))
    state = ContextState()
    outcome = await engine.compress(session, stored, state, trigger="manual")
    late = await store.append_message(session.id, ChatMessage.user("written while summarizing"))
    assert outcome.plan is not None
    await store.archive_and_summarize(session.id, outcome.plan)
    active = await store.load_active(session.id)
    assert active[-1] == late
    assert [m.kind for m in active].index("summary") < len(active) - 1


async def test_restore_latest_compaction_brings_back_the_original_view(
    engine: ContextCompressor, store: InMemoryStore, session: AgentSession
) -> None:
    stored = await persist(store, session.id, conversation(20, words=400))
    await compact(engine, store, session, trigger="manual")
    record = await store.restore_latest_compaction(session.id)
    assert record.restored_at is not None
    assert await store.load_active(session.id) == stored


async def test_archived_turns_stay_recallable_and_searchable(
    engine: ContextCompressor, store: InMemoryStore, session: AgentSession
) -> None:
    stored = await persist(store, session.id, conversation(20, words=400))
    result = await compact(engine, store, session, trigger="manual")
    assert result.record is not None
    page = await store.recall(session.id, compaction_id=result.record.id, limit=5)
    assert page.total == result.record.messages_archived and page.next_offset == 5
    assert page.messages[0].content == stored[1].content
    hits = await store.search('"Question 3" mod3*', SearchFilters(session_id=session.id, state="archived"))
    assert hits and hits[0].compacted and ("Question", True) in snippet_parts(hits[0].snippet)


async def test_failed_attempt_persists_only_state(store: InMemoryStore, session: AgentSession) -> None:
    engine = ContextCompressor(CompressionSettings(), ScriptedSummarizer(Overloaded("x")), summary_model="m")
    stored = await persist(store, session.id, conversation(20, words=400))
    result = await compact(engine, store, session, trigger="in_loop", prompt_tokens=12_000)
    assert result.record is None and result.messages == stored
    assert await store.list_compactions(session.id) == []
    assert (await store.load_context_state(session.id)).consecutive_failures == 1


async def test_append_is_idempotent_on_platform_message_id(
    store: InMemoryStore, session: AgentSession
) -> None:
    first = await store.append_message(session.id, ChatMessage.user("hi", platform_message_id="42"))
    again = await store.append_message(session.id, ChatMessage.user("hi", platform_message_id="42"))
    assert first == again and len(await store.load_active(session.id)) == 1


async def test_memory_files_rename_and_delete_directories(store: InMemoryStore) -> None:
    await store.memory_put("chat", "/memories/a/one.md", "1")
    await store.memory_put("chat", "memories/a/two.md", "2")
    assert await store.memory_rename("chat", "/memories/a", "/memories/b") == 2
    assert [e.path for e in await store.memory_list("chat")] == ["/memories/b/one.md", "/memories/b/two.md"]
    assert await store.memory_delete("chat", "/memories/b") == 2
    assert await store.memory_get("chat", "/memories/b/one.md") is None
