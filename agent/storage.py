"""The storage interface the agent needs; the gateway's store implements it.

Keeping it a ``Protocol`` lets the agent and its compressor run with no database
(tests use ``tests.fakes.memory_store.InMemoryStore``).
"""

from __future__ import annotations

from typing import Protocol

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


class ConversationStore(Protocol):
    """Persistence for one or many conversations, addressed by session id."""

    async def append_message(self, session_id: str, message: ChatMessage) -> ChatMessage:
        """Persist ``message`` at the end of the session; returns it with ``id`` and ``seq``.

        Idempotent on ``platform_message_id``: a second append of the same platform
        message returns the stored row instead of a new one.
        """
        ...

    async def append_reply(
        self, session_id: str, message: ChatMessage, usage: UsageRecord, state: ContextState
    ) -> ChatMessage:
        """:meth:`append_message` for the model's reply, with the call's usage and the
        compression state it taught (as :meth:`record_usage` with ``state``) in the same
        transaction: most calls store all three, and one commit costs less than two."""
        ...

    async def load_active(self, session_id: str) -> list[ChatMessage]:
        """The ACTIVE view of the session, in order."""
        ...

    async def archive_and_summarize(self, session_id: str, plan: CompactionPlan) -> CompactionRecord:
        """Apply a compaction in one transaction (see :class:`agent.types.CompactionPlan`)."""
        ...

    async def search(
        self,
        query: str,
        filters: SearchFilters,
        *,
        limit: int = 20,
        offset: int = 0,
        sort: SearchSort = "relevance",
    ) -> list[SearchHit]:
        """Full-text search, best (or, ``sort="recent"``, newest) first; a query that means
        nothing returns ``[]``, never an error."""
        ...

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
        """Archived (compacted) messages of this session, verbatim, in order, paged."""
        ...

    async def list_compactions(self, session_id: str) -> list[CompactionRecord]:
        """The session's compactions, oldest first."""
        ...

    async def record_usage(
        self, session_id: str, record: UsageRecord, *, state: ContextState | None = None
    ) -> None:
        """Store one API call's token usage and cost; with ``state``, save the session's
        compression bookkeeping in the same transaction (as :meth:`save_context_state`)."""
        ...

    async def record_engine_failure(self, session_id: str | None, failure: EngineFailure) -> None:
        """Keep one fail-open event (counted by ``/metrics``)."""
        ...

    async def record_strategy_run(self, session_id: str, run: StrategyRun) -> None:
        """Keep one run of a strategy that made no compaction row (counted by ``/metrics`` and
        ``/context`` with the compactions)."""
        ...

    async def load_context_state(self, session_id: str) -> ContextState:
        """Compression bookkeeping (cooldowns, breaker, calibration) for the session."""
        ...

    async def save_context_state(self, session_id: str, state: ContextState) -> None:
        """Persist compression bookkeeping."""
        ...

    async def open_delegation(self, parent_session_id: str, *, model: str, system_prompt: str) -> str:
        """A new session for a sub-agent run by ``parent_session_id`` (same chat, linked to it);
        returns its id."""
        ...

    async def close_delegation(self, session_id: str, outcome: str) -> None:
        """End a sub-agent's session and archive its messages (still searchable); idempotent."""
        ...

    async def memory_list(self, scope: str, prefix: str = "/memories") -> list[MemoryEntry]:
        """Memory files under ``prefix`` (paths are normalized, start with ``/memories``)."""
        ...

    async def memory_get(self, scope: str, path: str) -> MemoryEntry | None: ...

    async def memory_put(self, scope: str, path: str, content: str) -> None:
        """Create or overwrite a memory file."""
        ...

    async def memory_delete(self, scope: str, path: str) -> int:
        """Delete a file, or every file under a directory path; returns how many."""
        ...

    async def memory_rename(self, scope: str, old_path: str, new_path: str) -> int:
        """Move a file or directory; returns how many files moved."""
        ...
