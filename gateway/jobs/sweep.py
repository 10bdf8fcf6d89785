"""The quiet-hours sweep: compact idle, well-filled sessions at night, so the morning's first
message pays no compaction latency.

During ``scheduler.sweep.quiet_hours`` (read in ``timezone``), every ``interval_seconds`` it
looks at current sessions idle for ``idle_minutes`` or more, least recently active first, and
compacts (trigger ``scheduled``) those whose persisted context is at least ``min_fill`` of
the effective budget (min(window, budget), as every other threshold), at most ``max_sessions``
per run. The size is the same estimate hygiene uses;
the compaction is the same :func:`agent.compaction.compact` every trigger uses. A session is
left alone when a turn runs or an inbox item waits for it, while its hygiene cooldown runs,
or when the engine declines (summarizer breaker open or cooling down, or compacting again
would change nothing).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from agent.compaction import compact, with_api_limit
from agent.context_engine import ContextEngine
from agent.errors import CompressionError, LLMError, StoreError
from agent.loop_request import estimate_request_tokens
from gateway.config import SweepSettings
from gateway.local_time import in_quiet_hours, parse_quiet_hours
from gateway.serving.dispatch import Gateway
from gateway.serving.sessions import SessionDirectory
from gateway.store.records import SessionInfo
from gateway.store.repository import Store

_log = logging.getLogger(__name__)

PAGE = 100
MAX_LOOKED_PER_SLOT = 50
"""At most this many sessions are measured per ``max_sessions`` slot in one run (a bound on
the work of a run over thousands of idle, small sessions)."""


class Sweep:
    """One sweep configuration over one worker's parts; :meth:`run` is the scheduled job."""

    def __init__(
        self,
        settings: SweepSettings,
        *,
        timezone: str,
        store: Store,
        engine: ContextEngine,
        directory: SessionDirectory,
        gateway: Gateway,
        tools: Callable[[], list[dict[str, Any]]],
    ) -> None:
        self._settings = settings
        self._window = parse_quiet_hours(settings.quiet_hours)
        self._timezone = timezone
        self._store = store
        self._engine = engine
        self._directory = directory
        self._gateway = gateway
        self._tools = tools
        # Sessions measured as not worth compacting, with the activity time they were measured
        # at: an idle session does not change, so it is not measured again until it does.
        self._settled: dict[str, datetime] = {}

    @staticmethod
    def acted(result: dict[str, int]) -> bool:
        """Whether a run compacted or tried to (the other outcomes are sessions left alone)."""
        return bool(result.get("compacted") or result.get("failed"))

    def describe(self) -> str:
        return f"in quiet hours {self._window} when idle >= {self._settings.idle_minutes} min"

    async def run(self, now: datetime) -> dict[str, int]:
        """Sweep once at ``now``; returns what it did, by outcome."""
        if not in_quiet_hours(now, self._window, self._timezone):
            return {"outside_quiet_hours": 1}
        counts: Counter[str] = Counter()
        idle_before = now - timedelta(minutes=self._settings.idle_minutes)
        budget = self._settings.max_sessions * MAX_LOOKED_PER_SLOT
        after: tuple[datetime, str] | None = None
        while counts["compacted"] < self._settings.max_sessions and counts["looked"] < budget:
            page = await self._store.idle_sessions(idle_before=idle_before, limit=PAGE, after=after)
            if not page:
                break
            for info in page:
                if counts["compacted"] >= self._settings.max_sessions or counts["looked"] >= budget:
                    break
                if self._settled.get(info.id) == info.last_activity_at:
                    counts["unchanged"] += 1
                    continue
                counts["looked"] += 1
                counts[await self._visit(info, now)] += 1
            after = (page[-1].last_activity_at, page[-1].id)
        return dict(counts)

    async def _visit(self, info: SessionInfo, now: datetime) -> str:
        async with self._gateway.quiet_session(info.key) as quiet:
            if not quiet:
                return "busy"
            async with self._store.session_guard(info.key):
                if await self._store.inbox_open(info.key):
                    return "busy"  # a message arrived, or another worker serves the chat
                return await self._compact_if_full(info, now)

    async def _compact_if_full(self, info: SessionInfo, now: datetime) -> str:
        session = self._directory.agent_session(info)
        history = await self._store.load_active(session.id)
        state = await self._store.load_context_state(session.id)
        session = with_api_limit(session, state)
        estimate = estimate_request_tokens(session, history, self._tools(), state)
        fill = estimate / session.budget_window
        fields = {"session": session.id, "trigger": "scheduled", "tokens_before": estimate}
        if fill < self._settings.min_fill:
            self._settled[info.id] = info.last_activity_at
            return "below_fill"
        if state.hygiene_cooldown_until is not None and now < state.hygiene_cooldown_until:
            return "cooldown"
        if not self._engine.should_compress(session, state, estimate, trigger="scheduled"):
            return "cooldown"  # the engine's breaker, cooldown or anti-thrash guard said no
        try:
            result = await compact(
                self._engine,
                self._store,
                session,
                trigger="scheduled",
                prompt_tokens=estimate,
                messages=history,
            )
        except (CompressionError, LLMError, StoreError) as exc:
            # StoreError: the plan lost a race with a compaction elsewhere; the session is fine.
            _log.warning("sweep compaction failed: %s", exc, extra=fields)
            return "failed"
        if result.record is None:
            _log.info("sweep compaction changed nothing: %s", result.outcome.reason, extra=fields)
            return "failed"
        _log.info(
            "sweep compacted a session at %.0f%%: %d messages archived, %d -> %d tokens",
            100 * fill,
            result.record.messages_archived,
            result.record.tokens_before,
            result.record.tokens_after,
            extra={**fields, "tokens_after": result.record.tokens_after, "compaction": result.record.id},
        )
        return "compacted"
