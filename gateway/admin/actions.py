"""What an operator can do to a session or a user, for the API and the pages alike; each act is audited.

Compacting goes through :func:`agent.compaction.compact`, the path every other trigger takes
(trigger ``manual``, as ``/compact`` in chat). It, and erasure, wait for a running turn: while a
worker holds a live lease on the session's inbox the answer is 409, try again in a moment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from agent.compaction import compact, forget
from agent.context_engine import ContextEngine
from agent.engines.strategies.snip import SnipRefused
from agent.errors import CompressionError, HygieiaError, LLMError
from agent.types import AgentSession, CompactionRecord
from gateway.admin.errors import BadRequest, Conflict
from gateway.serving.sessions import agent_session_of
from gateway.store.audit_ops import AuditEntry
from gateway.store.erase_ops import EraseCounts
from gateway.store.records import SessionInfo
from gateway.store.repository import Store

_log = logging.getLogger(__name__)

MAX_FOCUS_CHARS = 2000
MAX_ID_CHARS = 128


class Unavailable(HygieiaError):
    """The action needs something that is down or not configured (503): the model, for compaction."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an action did, in one sentence, and its audit row."""

    message: str
    audit: AuditEntry
    compaction: CompactionRecord | None = None
    erased: EraseCounts | None = None


@dataclass
class AdminActions:
    """The actions over ``store``; compaction needs ``engine`` and each model's window."""

    store: Store
    engine: ContextEngine | None = None
    context_window: Callable[[str], int] | None = None
    budget: Callable[[str], int | None] | None = None

    def _session(self, info: SessionInfo) -> AgentSession:
        """The agent's view of ``info``, as a turn in it would see it (window and budget)."""
        assert self.context_window is not None
        budget = self.budget(info.model) if self.budget is not None else None
        return agent_session_of(info, window=self.context_window(info.model), budget=budget)

    async def _busy(self, info: SessionInfo) -> None:
        if await self.store.turn_in_progress(info.key):
            raise Conflict(f"a turn is running in {info.key}; try again in a moment")

    async def compact(self, session_id: str, *, focus: str, actor: str) -> Outcome:
        """Compact the session now (trigger ``manual``), optionally focused."""
        if len(focus) > MAX_FOCUS_CHARS:
            raise BadRequest(f"focus: at most {MAX_FOCUS_CHARS} characters")
        if self.engine is None or self.context_window is None:
            raise Unavailable("compaction is not available here: this admin app has no model configured")
        info = await self.store.get_session(session_id)
        await self._busy(info)
        session = self._session(info)
        try:
            result = await compact(
                self.engine, self.store, session, trigger="manual", focus=focus.strip() or None
            )
        except (CompressionError, LLMError) as exc:
            _log.warning("admin compaction failed: %s", exc, extra={"session": info.id})
            raise Unavailable(f"the summarizer failed ({exc}); nothing was changed") from None
        record = result.record
        if record is None:
            message = f"Nothing was compacted ({result.outcome.reason or 'nothing to compact yet'})."
            counts = {"archived": 0}
        else:
            message = (
                f"Compacted {record.messages_archived} messages "
                f"({record.tokens_before:,} -> {record.tokens_after:,} tokens)."
            )
            counts = {
                "archived": record.messages_archived,
                "tokens_before": record.tokens_before,
                "tokens_after": record.tokens_after,
            }
        entry = await self.store.record_action(
            "admin_compact",
            actor=actor,
            session_id=info.id,
            platform=info.platform,
            detail=message + (f" Focus: {focus.strip()}" if focus.strip() else ""),
            counts=counts,
        )
        return Outcome(message, entry, compaction=record)

    async def forget(
        self,
        session_id: str,
        *,
        last: int | None = None,
        from_id: int | None = None,
        to_id: int | None = None,
        actor: str,
    ) -> Outcome:
        """Snip: set the last ``last`` exchanges, or the messages ``from_id``..``to_id``, aside
        (soft-archived like a compaction: searchable, recallable, undone by restore)."""
        if self.engine is None or self.context_window is None:
            raise Unavailable("snipping is not available here: this admin app has no engine configured")
        if last is None and from_id is None and to_id is None:
            raise BadRequest("say what to forget: last, or from_id and to_id")
        info = await self.store.get_session(session_id)
        await self._busy(info)
        session = self._session(info)
        try:
            result = await forget(self.engine, self.store, session, last=last, from_id=from_id, to_id=to_id)
        except SnipRefused as exc:
            raise BadRequest(f"nothing was set aside: {exc}") from None
        record = result.record
        assert record is not None
        message = (
            f"Set aside {record.messages_archived} messages "
            f"({record.tokens_before:,} -> {record.tokens_after:,} tokens)."
        )
        entry = await self.store.record_action(
            "admin_forget",
            actor=actor,
            session_id=info.id,
            platform=info.platform,
            detail=f"{message} Compaction {record.id}.",
            counts={"archived": record.messages_archived, "tokens_freed": record.tokens_freed},
        )
        return Outcome(message, entry, compaction=record)

    async def restore(self, session_id: str, *, actor: str) -> Outcome:
        """Undo the latest compaction (its archived turns become active again)."""
        info = await self.store.get_session(session_id)
        record = await self.store.restore_latest_compaction(info.id)
        message = (
            f"Undid the {record.trigger} compaction: {record.messages_archived} messages are active again."
        )
        entry = await self.store.record_action(
            "admin_restore",
            actor=actor,
            session_id=info.id,
            platform=info.platform,
            detail=f"{message} Compaction {record.id}.",
            counts={"restored": record.messages_archived},
        )
        return Outcome(message, entry, compaction=record)

    async def end(self, session_id: str, *, actor: str) -> Outcome:
        """End the session; the chat's next message starts a new one (this one stays searchable)."""
        info = await self.store.get_session(session_id)
        if info.ended:
            raise Conflict(f"session {info.key} already ended")
        await self.store.end_session(info.id, "admin")
        # A turn still running in it, on whichever worker, stops now rather than answering into
        # the ended session (PostgreSQL; one SQLite process has no channel to the others).
        await self.store.notify_command(info.key, "end")
        message = f"Ended {info.key}; its next message starts a new session."
        entry = await self.store.record_action(
            "admin_end", actor=actor, session_id=info.id, platform=info.platform, detail=message, counts={}
        )
        return Outcome(message, entry)

    async def erase(self, platform: str, user_id: str, *, actor: str) -> Outcome:
        """Erase a platform user's messages everywhere (see :mod:`gateway.store.erase_ops`)."""
        platform, user_id = checked_user(platform, user_id)
        for key in await self.store.keys_written_by(platform, user_id):
            if await self.store.turn_in_progress(key):
                raise Conflict(f"a turn is running in {key}; try again in a moment")
        counts = await self.store.erase_user(platform, user_id)
        message = (
            f"Erased {counts.messages} messages of {platform}:{user_id} in {counts.sessions} session(s); "
            f"{counts.summaries_redacted} summaries redacted, {counts.inbox} inbox rows and "
            f"{counts.memories} memory files removed."
        )
        entry = await self.store.record_action(
            "admin_erase",
            actor=actor,
            platform=platform,
            user_id=user_id,
            detail=message + " Erasure at the user's request is the one exception to never deleting.",
            counts=counts.as_dict(),
        )
        return Outcome(message, entry, erased=counts)


def checked_user(platform: str, user_id: str) -> tuple[str, str]:
    """Both present, bounded, without NUL, the platform without ``:`` (so ``<platform>:<user_id>``
    splits one way only, however many ``:`` a user id holds); BadRequest otherwise."""
    platform, user_id = platform.strip(), user_id.strip()
    for name, value in (("platform", platform), ("user_id", user_id)):
        if not value or len(value) > MAX_ID_CHARS or "\x00" in value:
            raise BadRequest(f"{name}: required, at most {MAX_ID_CHARS} characters")
    if ":" in platform:
        raise BadRequest(f"platform: no platform name holds ':' ({platform[:40]!r}); the user id goes apart")
    return platform, user_id
