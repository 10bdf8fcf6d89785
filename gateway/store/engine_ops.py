"""What the context engines leave behind: fail-open events, strategy runs that make no compaction
row (the API's tool-result clearing), and per-strategy totals over both."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, insert, select

from agent.clock import utcnow
from agent.types import CompactionRecord, EngineFailure, StrategyRun, strategy_summary
from gateway.store.base import Repo
from gateway.store.columns import clean_json, clean_text
from gateway.store.models import compactions, engine_failures, strategy_runs

REASON_CHARS = 2000


@dataclass(frozen=True, slots=True)
class StrategyTotals:
    """Per strategy: compactions made and tokens they freed (restored ones included: they ran),
    and the runs that made no compaction row (server-side clearing: one per call it cleared)."""

    runs: dict[str, int] = field(default_factory=dict)
    tokens_freed: dict[str, int] = field(default_factory=dict)
    engine_failures: dict[tuple[str, str], int] = field(default_factory=dict)
    """(engine, kind) -> how many times the built-in served in its place."""


@dataclass(frozen=True, slots=True)
class SessionStrategyRuns:
    """One strategy's runs without a compaction row in one session."""

    strategy: str
    runs: int
    tokens_freed: int
    last_tokens_freed: int
    last_at: datetime


class EngineOps(Repo):
    async def record_engine_failure(self, session_id: str | None, failure: EngineFailure) -> None:
        """Keep one fail-open event."""
        async with self._tx() as s:
            await s.execute(
                insert(engine_failures).values(
                    session_id=session_id,
                    engine=failure.engine[:64],
                    operation=failure.operation[:32],
                    kind=failure.kind,
                    reason=clean_text(failure.reason[:REASON_CHARS]),
                    created_at=utcnow(),
                )
            )

    async def record_strategy_run(self, session_id: str, run: StrategyRun) -> None:
        """Keep one run of a strategy that changed the request, not the store."""
        async with self._tx() as s:
            await s.execute(
                insert(strategy_runs).values(
                    session_id=session_id,
                    strategy=run.strategy[:32],
                    tokens_freed=max(0, run.tokens_freed),
                    detail=clean_json(dict(run.detail)) or None,
                    created_at=utcnow(),
                )
            )

    async def session_strategy_runs(self, session_id: str) -> list[SessionStrategyRuns]:
        """Per strategy, this session's runs that made no compaction row, in the order each
        strategy first ran."""
        stmt = (
            select(
                strategy_runs.c.strategy,
                func.count(),
                func.sum(strategy_runs.c.tokens_freed),
                func.max(strategy_runs.c.id),
                func.min(strategy_runs.c.id),
            )
            .where(strategy_runs.c.session_id == session_id)
            .group_by(strategy_runs.c.strategy)
        )
        async with self._tx(write=False) as s:
            rows = (await s.execute(stmt)).all()
            if not rows:
                return []
            latest = {int(r[3]) for r in rows}
            last = await s.execute(
                select(strategy_runs.c.id, strategy_runs.c.tokens_freed, strategy_runs.c.created_at).where(
                    strategy_runs.c.id.in_(latest)
                )
            )
            last_by_id = {int(i): (int(t), at) for i, t, at in last}
        out = [
            SessionStrategyRuns(
                strategy=str(name),
                runs=int(n),
                tokens_freed=int(total or 0),
                last_tokens_freed=last_by_id[int(top)][0],
                last_at=last_by_id[int(top)][1],
            )
            for name, n, total, top, _ in sorted(rows, key=lambda r: int(r[4]))
        ]
        return out

    async def strategy_totals(self) -> StrategyTotals:
        """Runs and tokens freed per strategy, and fail-open events per engine and kind."""
        freed = func.sum(compactions.c.tokens_before - compactions.c.tokens_after)
        async with self._tx(write=False) as s:
            rows = await s.execute(
                select(compactions.c.strategy, func.count(), freed).group_by(compactions.c.strategy)
            )
            runs: dict[str, int] = {}
            tokens: dict[str, int] = {}
            for name, n, total in rows:
                runs[str(name)] = int(n)
                tokens[str(name)] = max(0, int(total or 0))
            clearing = await s.execute(
                select(
                    strategy_runs.c.strategy, func.count(), func.sum(strategy_runs.c.tokens_freed)
                ).group_by(strategy_runs.c.strategy)
            )
            for name, n, total in clearing:
                runs[str(name)] = runs.get(str(name), 0) + int(n)
                tokens[str(name)] = tokens.get(str(name), 0) + max(0, int(total or 0))
            failed = await s.execute(
                select(engine_failures.c.engine, engine_failures.c.kind, func.count()).group_by(
                    engine_failures.c.engine, engine_failures.c.kind
                )
            )
            failures = {(str(e), str(k)): int(n) for e, k, n in failed}
        return StrategyTotals(runs=runs, tokens_freed=tokens, engine_failures=failures)


@dataclass(frozen=True, slots=True)
class StrategyOverview:
    """What ``/context`` and the admin session page say: the strategy that ran last, what it
    freed, and (strategy, runs, tokens freed) over compactions in force and runs without a row."""

    last: str
    last_freed: int
    totals: list[tuple[str, int, int]]


def strategy_overview(
    records: Sequence[CompactionRecord], runs: Sequence[SessionStrategyRuns]
) -> StrategyOverview | None:
    live = [r for r in records if r.restored_at is None]
    if not live and not runs:
        return None
    totals = {name: [n, freed] for name, n, freed in strategy_summary(live)}
    for run in runs:
        entry = totals.setdefault(run.strategy, [0, 0])
        entry[0] += run.runs
        entry[1] += run.tokens_freed
    latest = max(runs, key=lambda r: r.last_at, default=None)
    if latest is not None and (not live or latest.last_at >= live[-1].created_at):
        last, last_freed = latest.strategy, latest.last_tokens_freed
    else:
        last, last_freed = live[-1].strategy, live[-1].tokens_freed
    return StrategyOverview(last, last_freed, [(name, n, freed) for name, (n, freed) in totals.items()])
