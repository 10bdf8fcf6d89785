"""What a sub-agent's run writes: its transcript to its own session, its cost to the chat.

:class:`LedgerStore` is the storage the sub-agent's loop sees: every call passes through to the
real store, except that usage rows go to the parent session, so the chat's ``/usage``, the admin
usage report and the cost figures count what its delegations spent.
"""

from __future__ import annotations

from agent.storage import ConversationStore
from agent.types import (
    ChatMessage,
    CompactionPlan,
    CompactionRecord,
    ContextState,
    EngineFailure,
    MemoryEntry,
    RecallPage,
    SearchFilters,
    SearchHit,
    SearchSort,
    StrategyRun,
    UsageRecord,
)


class LedgerStore:
    """``inner`` for the sub-agent's session, with usage charged to ``parent_id``."""

    def __init__(self, inner: ConversationStore, parent_id: str) -> None:
        self._inner = inner
        self._parent = parent_id

    async def append_message(self, session_id: str, message: ChatMessage) -> ChatMessage:
        return await self._inner.append_message(session_id, message)

    async def append_reply(
        self, session_id: str, message: ChatMessage, usage: UsageRecord, state: ContextState
    ) -> ChatMessage:
        stored = await self._inner.append_message(session_id, message)
        await self._inner.record_usage(self._parent, usage)
        await self._inner.save_context_state(session_id, state)
        return stored

    async def load_active(self, session_id: str) -> list[ChatMessage]:
        return await self._inner.load_active(session_id)

    async def archive_and_summarize(self, session_id: str, plan: CompactionPlan) -> CompactionRecord:
        return await self._inner.archive_and_summarize(session_id, plan)

    async def search(
        self,
        query: str,
        filters: SearchFilters,
        *,
        limit: int = 20,
        offset: int = 0,
        sort: SearchSort = "relevance",
    ) -> list[SearchHit]:
        return await self._inner.search(query, filters, limit=limit, offset=offset, sort=sort)

    async def recall(
        self,
        session_id: str,
        *,
        compaction_id: str | None = None,
        from_id: int | None = None,
        to_id: int | None = None,
        offset: int = 0,
        limit: int = 20,
    ) -> RecallPage:
        return await self._inner.recall(
            session_id, compaction_id=compaction_id, from_id=from_id, to_id=to_id, offset=offset, limit=limit
        )

    async def list_compactions(self, session_id: str) -> list[CompactionRecord]:
        return await self._inner.list_compactions(session_id)

    async def record_usage(
        self, session_id: str, record: UsageRecord, *, state: ContextState | None = None
    ) -> None:
        await self._inner.record_usage(self._parent, record)
        if state is not None:
            await self._inner.save_context_state(session_id, state)

    async def record_engine_failure(self, session_id: str | None, failure: EngineFailure) -> None:
        await self._inner.record_engine_failure(session_id, failure)

    async def record_strategy_run(self, session_id: str, run: StrategyRun) -> None:
        await self._inner.record_strategy_run(session_id, run)

    async def load_context_state(self, session_id: str) -> ContextState:
        return await self._inner.load_context_state(session_id)

    async def save_context_state(self, session_id: str, state: ContextState) -> None:
        await self._inner.save_context_state(session_id, state)

    async def open_delegation(self, parent_session_id: str, *, model: str, system_prompt: str) -> str:
        return await self._inner.open_delegation(parent_session_id, model=model, system_prompt=system_prompt)

    async def close_delegation(self, session_id: str, outcome: str) -> None:
        await self._inner.close_delegation(session_id, outcome)

    async def memory_list(self, scope: str, prefix: str = "/memories") -> list[MemoryEntry]:
        return await self._inner.memory_list(scope, prefix)

    async def memory_get(self, scope: str, path: str) -> MemoryEntry | None:
        return await self._inner.memory_get(scope, path)

    async def memory_put(self, scope: str, path: str, content: str) -> None:
        await self._inner.memory_put(scope, path, content)

    async def memory_delete(self, scope: str, path: str) -> int:
        return await self._inner.memory_delete(scope, path)

    async def memory_rename(self, scope: str, old_path: str, new_path: str) -> int:
        return await self._inner.memory_rename(scope, old_path, new_path)


def _conforms(store: LedgerStore) -> ConversationStore:
    return store  # mypy proves the ledger is a whole store
