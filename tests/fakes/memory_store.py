"""A dict-backed :class:`agent.storage.ConversationStore` with the SQL store's semantics.

Ordering by ``(seq, sub_seq)``; ``archive_and_summarize`` places each insertion at its
anchor's seq with the next sub_seq, all-or-nothing; recall pages compacted rows; the search
query language is the SQL store's own parser (``gateway.store.search_query``).
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from agent.errors import NotFound, StoreError
from agent.types import (
    HIT_END,
    HIT_START,
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
from gateway.store.search_query import Term, parse, tokens_of

MEMORY_ROOT = "/memories"
SNIPPET_TOKENS = 24


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class _Row:
    session_id: str
    message: ChatMessage
    sub_seq: int = 0
    produced_by: str | None = None

    @property
    def key(self) -> tuple[int, int]:
        return (self.message.seq or 0, self.sub_seq)


@dataclass(slots=True)
class _SessionMeta:
    platform: str = ""
    chat_id: str = ""
    user_id: str | None = None
    parent: str | None = None
    ended: str | None = None


def normalize_memory_path(path: str) -> str:
    """``/memories/...`` with no ``..``, no doubled or trailing slashes."""
    parts = [p for p in path.replace("\\", "/").split("/") if p and p != "."]
    if ".." in parts:
        raise StoreError(f"invalid memory path: {path}")
    if parts and parts[0] == MEMORY_ROOT.strip("/"):
        parts = parts[1:]
    return "/".join([MEMORY_ROOT, *parts])


class InMemoryStore:
    """Everything in dicts; a ``ConversationStore`` for tests and benchmarks."""

    def __init__(self) -> None:
        self._rows: dict[int, _Row] = {}
        self._next_id = 1
        self._compactions: dict[str, list[CompactionRecord]] = {}
        self._produced: dict[str, list[int]] = {}
        self._states: dict[str, ContextState] = {}
        self._memories: dict[tuple[str, str], MemoryEntry] = {}
        self._sessions: dict[str, _SessionMeta] = {}
        self.usage: dict[str, list[UsageRecord]] = {}
        self.engine_failures: list[tuple[str | None, EngineFailure]] = []
        self.strategy_runs: list[tuple[str, StrategyRun]] = []

    # ---- helpers for tests --------------------------------------------------------------

    def add_session(
        self, session_id: str, *, platform: str = "", chat_id: str = "", user_id: str | None = None
    ) -> None:
        """Session metadata used by search filters (platform, chat)."""
        self._sessions[session_id] = _SessionMeta(platform, chat_id, user_id)

    def all_messages(self, session_id: str) -> list[ChatMessage]:
        """Every row of the session, any state, in order."""
        return [r.message for r in self._session_rows(session_id)]

    def _session_rows(self, session_id: str) -> list[_Row]:
        return sorted((r for r in self._rows.values() if r.session_id == session_id), key=lambda r: r.key)

    def _insert(
        self, session_id: str, message: ChatMessage, *, seq: int, sub_seq: int, produced_by: str | None
    ) -> int:
        row_id = self._next_id
        self._next_id += 1
        stored = replace(
            copy.deepcopy(message),
            id=row_id,
            seq=seq,
            created_at=message.created_at or _now(),
            active=True,
            compacted=False,
            compaction_id=None,
        )
        self._rows[row_id] = _Row(session_id, stored, sub_seq, produced_by)
        return row_id

    # ---- messages -----------------------------------------------------------------------

    async def append_message(self, session_id: str, message: ChatMessage) -> ChatMessage:
        if message.platform_message_id is not None:
            for row in self._rows.values():
                if (
                    row.session_id == session_id
                    and row.message.platform_message_id == message.platform_message_id
                ):
                    return copy.deepcopy(row.message)
        seq = (
            max((r.message.seq or 0 for r in self._rows.values() if r.session_id == session_id), default=0)
            + 1
        )
        row_id = self._insert(session_id, message, seq=seq, sub_seq=0, produced_by=None)
        return copy.deepcopy(self._rows[row_id].message)

    async def append_reply(
        self, session_id: str, message: ChatMessage, usage: UsageRecord, state: ContextState
    ) -> ChatMessage:
        stored = await self.append_message(session_id, message)
        await self.record_usage(session_id, usage, state=state)
        return stored

    async def load_active(self, session_id: str) -> list[ChatMessage]:
        return [copy.deepcopy(r.message) for r in self._session_rows(session_id) if r.message.active]

    async def get_message(self, message_id: int) -> ChatMessage:
        row = self._rows.get(message_id)
        if row is None:
            raise NotFound(f"no message {message_id}")
        return copy.deepcopy(row.message)

    async def archive_and_summarize(self, session_id: str, plan: CompactionPlan) -> CompactionRecord:
        # Validate everything first: the change is all-or-nothing, like the SQL transaction.
        named = [*plan.archive_ids, *(i.anchor_id for i in plan.insertions)]
        for row_id in named:
            row = self._rows.get(row_id)
            if row is None or row.session_id != session_id:
                raise NotFound(f"message {row_id} is not in session {session_id}")
        compaction_id = plan.compaction_id
        if any(compaction_id == c.id for records in self._compactions.values() for c in records):
            raise StoreError(f"compaction {compaction_id} was already applied")
        archived = [self._rows[i] for i in plan.archive_ids]
        for row in archived:
            row.message = replace(row.message, active=False, compacted=True, compaction_id=compaction_id)
        produced: list[int] = []
        summary_id: int | None = None
        for insertion in plan.insertions:
            seq = self._rows[insertion.anchor_id].message.seq or 0
            sub = max(
                r.sub_seq for r in self._rows.values() if r.session_id == session_id and r.message.seq == seq
            )
            product = replace(insertion.message, platform_message_id=None)
            new_id = self._insert(session_id, product, seq=seq, sub_seq=sub + 1, produced_by=compaction_id)
            produced.append(new_id)
            if insertion.message.kind == "summary":
                summary_id = new_id
        seqs = [r.message.seq or 0 for r in archived]
        record = CompactionRecord(
            id=compaction_id,
            session_id=session_id,
            trigger=plan.trigger,
            status=plan.status,
            archived_from_seq=min(seqs, default=None),
            archived_to_seq=max(seqs, default=None),
            messages_archived=len(archived),
            summary_message_id=summary_id,
            first_kept_id=plan.first_kept_id,
            tokens_before=plan.tokens_before,
            tokens_after=plan.tokens_after,
            model=plan.model,
            duration_ms=plan.duration_ms,
            focus=plan.focus,
            created_at=_now(),
            strategy=plan.strategy,
        )
        self._compactions.setdefault(session_id, []).append(record)
        self._produced[compaction_id] = produced
        return record

    async def restore_latest_compaction(self, session_id: str) -> CompactionRecord:
        records = self._compactions.get(session_id, [])
        live = [i for i, r in enumerate(records) if r.restored_at is None]
        if not live:
            raise NotFound(f"no compaction to restore in session {session_id}")
        index = live[-1]
        record = records[index]
        for row in self._rows.values():
            if row.message.compaction_id == record.id:
                row.message = replace(row.message, active=True, compacted=False, compaction_id=None)
        for row_id in self._produced.get(record.id, []):
            row = self._rows[row_id]
            row.message = replace(row.message, active=False)
        records[index] = replace(record, restored_at=_now())
        return records[index]

    async def list_compactions(self, session_id: str) -> list[CompactionRecord]:
        return list(self._compactions.get(session_id, []))

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
        offset, limit = max(offset, 0), max(limit, 0)
        matches = [
            r.message
            for r in self._session_rows(session_id)
            if r.message.compacted
            and (compaction_id is None or r.message.compaction_id == compaction_id)
            and (from_id is None or (r.message.id or 0) >= from_id)
            and (to_id is None or (r.message.id or 0) <= to_id)
        ]
        page = [copy.deepcopy(m) for m in matches[offset : offset + limit]]
        end = offset + len(page)
        return RecallPage(
            messages=page, total=len(matches), offset=offset, next_offset=end if end < len(matches) else None
        )

    # ---- search -------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        filters: SearchFilters,
        *,
        limit: int = 20,
        offset: int = 0,
        sort: SearchSort = "relevance",
    ) -> list[SearchHit]:
        parsed = parse(query)
        if not parsed.usable:
            return []
        hits: list[SearchHit] = []
        for row in self._rows.values():
            m = row.message
            if not self._passes(row, filters):
                continue
            words = [t.lower() for t in tokens_of(m.text)]
            spans = [_find(words, t) for t in parsed.positive]
            if any(not s for s in spans) or any(_find(words, t) for t in parsed.negative):
                continue
            marked = {i for found in spans for start, stop in found for i in range(start, stop)}
            hits.append(
                SearchHit(
                    message_id=m.id or 0,
                    session_id=row.session_id,
                    seq=m.seq or 0,
                    role=m.role,
                    kind=m.kind,
                    author_name=m.author_name,
                    created_at=m.created_at or _now(),
                    active=m.active,
                    compacted=m.compacted,
                    compaction_id=m.compaction_id,
                    snippet=_snippet(tokens_of(m.text), marked),
                    rank=float(sum(len(s) for s in spans)),
                )
            )
        if sort == "recent":
            hits.sort(key=lambda h: -h.message_id)
        else:
            hits.sort(key=lambda h: (-h.rank, h.message_id))
        return hits[offset : offset + limit]

    def _passes(self, row: _Row, f: SearchFilters) -> bool:
        m = row.message
        meta = self._sessions.get(row.session_id, _SessionMeta())
        state_ok = {"active": m.active, "archived": m.compacted, "all": m.active or m.compacted}[f.state]
        return (
            state_ok
            and (
                f.session_id is None
                or row.session_id == f.session_id
                or (f.with_delegations and meta.parent == f.session_id)
            )
            and (f.platform is None or meta.platform == f.platform)
            and (f.chat_id is None or meta.chat_id == f.chat_id)
            and (f.user_id is None or m.author_id == f.user_id)
            and (f.since is None or (m.created_at is not None and m.created_at >= f.since))
            and (f.until is None or (m.created_at is not None and m.created_at <= f.until))
            and (f.before_id is None or (m.id is not None and m.id < f.before_id))
        )

    # ---- delegations ----------------------------------------------------------------------

    async def open_delegation(self, parent_session_id: str, *, model: str, system_prompt: str) -> str:
        parent = self._sessions.get(parent_session_id, _SessionMeta())
        child = uuid.uuid4().hex
        self._sessions[child] = replace(parent, parent=parent_session_id, ended=None)
        return child

    async def close_delegation(self, session_id: str, outcome: str) -> None:
        for row in self._session_rows(session_id):
            if row.message.active:
                row.message = replace(row.message, active=False, compacted=True)
        self._sessions.setdefault(session_id, _SessionMeta()).ended = outcome

    # ---- usage and state ----------------------------------------------------------------

    async def record_usage(
        self, session_id: str, record: UsageRecord, *, state: ContextState | None = None
    ) -> None:
        self.usage.setdefault(session_id, []).append(record)
        if state is not None:
            await self.save_context_state(session_id, state)

    async def record_engine_failure(self, session_id: str | None, failure: EngineFailure) -> None:
        self.engine_failures.append((session_id, failure))

    async def record_strategy_run(self, session_id: str, run: StrategyRun) -> None:
        self.strategy_runs.append((session_id, run))

    async def load_context_state(self, session_id: str) -> ContextState:
        return copy.deepcopy(self._states.get(session_id, ContextState()))

    async def save_context_state(self, session_id: str, state: ContextState) -> None:
        self._states[session_id] = copy.deepcopy(state)

    # ---- memory -------------------------------------------------------------------------

    async def memory_list(self, scope: str, prefix: str = MEMORY_ROOT) -> list[MemoryEntry]:
        root = normalize_memory_path(prefix)
        return sorted(
            (
                e
                for (s, p), e in self._memories.items()
                if s == scope and (p == root or p.startswith(root + "/"))
            ),
            key=lambda e: e.path,
        )

    async def memory_get(self, scope: str, path: str) -> MemoryEntry | None:
        return self._memories.get((scope, normalize_memory_path(path)))

    async def memory_put(self, scope: str, path: str, content: str) -> None:
        norm = normalize_memory_path(path)
        if norm == MEMORY_ROOT:
            raise StoreError("a memory file needs a name under /memories")
        self._memories[(scope, norm)] = MemoryEntry(path=norm, content=content, updated_at=_now())

    async def memory_delete(self, scope: str, path: str) -> int:
        root = normalize_memory_path(path)
        doomed = [
            k for k in self._memories if k[0] == scope and (k[1] == root or k[1].startswith(root + "/"))
        ]
        for key in doomed:
            del self._memories[key]
        return len(doomed)

    async def memory_rename(self, scope: str, old_path: str, new_path: str) -> int:
        old, new = normalize_memory_path(old_path), normalize_memory_path(new_path)
        moving = [k for k in self._memories if k[0] == scope and (k[1] == old or k[1].startswith(old + "/"))]
        for key in moving:
            entry = self._memories.pop(key)
            path = new + key[1][len(old) :]
            self._memories[(scope, path)] = replace(entry, path=path, updated_at=_now())
        return len(moving)


def _find(words: list[str], term: Term) -> list[tuple[int, int]]:
    """Where ``term`` occurs in ``words`` as (start, stop) spans."""
    wanted = [t.lower() for t in term.tokens]
    n = len(wanted)
    spans: list[tuple[int, int]] = []
    for start in range(len(words) - n + 1):
        window = words[start : start + n]
        if window[:-1] != wanted[:-1]:
            continue
        last_ok = window[-1].startswith(wanted[-1]) if term.prefix else window[-1] == wanted[-1]
        if last_ok:
            spans.append((start, start + n))
    return spans


def _snippet(tokens: tuple[str, ...], marked: set[int]) -> str:
    """Up to ``SNIPPET_TOKENS`` tokens around the first hit, hits between the store's markers."""
    first = min(marked, default=0)
    start = max(0, first - SNIPPET_TOKENS // 3)
    window = range(start, min(len(tokens), start + SNIPPET_TOKENS))
    words = [f"{HIT_START}{tokens[i]}{HIT_END}" if i in marked else tokens[i] for i in window]
    return ("… " if start else "") + " ".join(words) + (" …" if window.stop < len(tokens) else "")
