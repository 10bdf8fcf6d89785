"""Drive real turns through the real service and watch them: the SQL each turn runs, and how long
the gateway takes from the inbox commit to the agent's call.

Shared by ``bench/gateway_overhead.py``, ``bench/turn_statements.py`` and the regression tests
that hold the statement count down. The model is the offline provider, wrapped to stamp the
moment the agent calls it, so what is measured is the gateway's own work and nothing of a model.
Statements are counted with SQLAlchemy's engine events (``before_cursor_execute``, ``begin``),
attributed to phases by time: intake (until the inbox row is committed), before the agent call,
and the rest of the turn (until the session's worker is idle). Only the turn's own statements
count: those of tasks started by its intake (the session's worker and the tasks it starts
inherit a context variable set around the intake), not the delivery loop's (sending the reply)
nor the scheduler's, which run in tasks of their own, at their own pace.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.offline import OfflineProvider
from agent.provider import LLMRequest, LLMResponse
from agent.types import ChatMessage
from gateway import runner
from gateway.config import Settings
from gateway.platforms.base import InboundHandler, InboundMessage, OutboundTarget, PlatformAdapter
from gateway.runner import Service
from gateway.store.db import Database
from gateway.store.records import SessionInfo

KEY = "probe:dm:c1"
QUIET_LEASES = {"session_lease_seconds": 600, "outbox_lease_seconds": 600, "notify": False}
"""Cluster settings for counting a turn's statements. Lease renewals (one statement every third of
a lease while a turn or a delivery round runs) cost per second, not per turn, so long leases keep
them out of the count; and without wake-ups the worker is started by the intake itself, so its
statements are the probed turn's (woken by a NOTIFY it ran outside it, and the count read 0)."""
IN_TURN: ContextVar[bool] = ContextVar("in_probe_turn", default=False)


@dataclass
class Tally:
    statements: int = 0
    transactions: int = 0

    def __sub__(self, other: Tally) -> Tally:
        return Tally(self.statements - other.statements, self.transactions - other.transactions)


@dataclass
class StatementCounter:
    """Counts statements and transactions on an engine: the probed turn's, and the others."""

    turn: Tally = field(default_factory=Tally)
    other: Tally = field(default_factory=Tally)
    log: list[str] = field(default_factory=list)
    keep_log: bool = False

    def attach(self, db: Database) -> None:
        """On every engine of ``db``: the async one and the worker-thread one whole transactions use."""
        db.listen("before_cursor_execute", self._statement)
        db.listen("begin", self._begin)

    def _bucket(self) -> Tally:
        return self.turn if IN_TURN.get() else self.other

    def _statement(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("BEGIN"):
            return  # SQLite's BEGIN, which we emit ourselves: counted as the transaction
        bucket = self._bucket()
        bucket.statements += 1
        if self.keep_log and bucket is self.turn:
            self.log.append(" ".join(statement.split())[:160])

    def _begin(self, _conn: Any) -> None:
        bucket = self._bucket()
        bucket.transactions += 1
        if self.keep_log and bucket is self.turn:
            self.log.append("-- transaction")

    def snapshot(self) -> Tally:
        return Tally(self.turn.statements, self.turn.transactions)


class StampingProvider(OfflineProvider):
    """The offline provider, noting when (and after how much SQL) each chat call starts."""

    def __init__(self, counter: StatementCounter) -> None:
        self.counter = counter
        self.calls: list[tuple[float, Tally]] = []

    async def create(self, request: LLMRequest) -> LLMResponse:
        if request.purpose == "chat":
            self.calls.append((time.perf_counter(), self.counter.snapshot()))
        return await super().create(request)


class NullAdapter(PlatformAdapter):
    name = "probe"

    def __init__(self) -> None:
        self.sent = 0

    async def start(self, handler: InboundHandler) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, target: OutboundTarget, text: str) -> list[str]:
        self.sent += 1
        return [str(self.sent)]


@dataclass(frozen=True)
class TurnSample:
    intake_ms: float
    to_call_ms: float
    intake: Tally
    before_call: Tally
    whole: Tally


class Probe:
    """A running service with one session of ``active`` messages (plus ``archived`` bulk rows)."""

    def __init__(
        self, service: Service, provider: StampingProvider, counter: StatementCounter, adapter: NullAdapter
    ) -> None:
        self.service = service
        self.adapter = adapter
        self.provider = provider
        self.counter = counter
        self.session_id = ""
        self._n = 0

    async def fill(self, active: int) -> None:
        """``active`` messages appended to the session (its archive was made before the start)."""
        store = self.service.store
        info = await open_session(self.service)
        self.session_id = info.id
        for i in range(active):
            make = ChatMessage.user if i % 2 == 0 else ChatMessage.assistant
            await store.append_message(info.id, make(f"message {i}: a sentence of ordinary chat text"))

    async def turn(self) -> TurnSample:
        """One addressed message, served to the end (reply queued, worker idle)."""
        self._n += 1
        msg = InboundMessage(
            platform="probe",
            chat_id="c1",
            user_id="u",
            text=f"question {self._n}",
            platform_message_id=f"p{self._n}",
        )
        before = self.counter.snapshot()
        started = time.perf_counter()
        token = IN_TURN.set(True)  # the worker task intake starts inherits it
        try:
            await self.service.gateway.intake(msg)  # returns once the inbox row is committed
        finally:
            IN_TURN.reset(token)
        committed = time.perf_counter()
        after_intake = self.counter.snapshot()
        calls = len(self.provider.calls)
        await self.service.gateway.wait_idle()
        if len(self.provider.calls) <= calls:
            raise RuntimeError("the turn made no chat call")
        called_at, at_call = self.provider.calls[calls]
        end = self.counter.snapshot()
        await self._delivered()
        return TurnSample(
            intake_ms=(committed - started) * 1000,
            to_call_ms=(called_at - committed) * 1000,
            intake=after_intake - before,
            before_call=at_call - after_intake,
            whole=end - before,
        )

    async def _delivered(self) -> None:
        """Until the reply is sent: the next turn does not overlap with this one's delivery."""
        for _ in range(1000):
            if self.adapter.sent >= self._n:
                break
            await asyncio.sleep(0.002)
        await asyncio.sleep(0.01)  # the row is marked sent just after the send returns


@asynccontextmanager
async def scratch_url(url: str | None, data_dir: Path) -> AsyncIterator[str]:
    """A database URL of one's own: SQLite in ``data_dir`` (``url`` None), else a fresh
    PostgreSQL schema on ``url``, dropped afterwards."""
    if url is None:
        yield f"sqlite+aiosqlite:///{data_dir / 'probe.db'}"
        return
    import psycopg

    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    schema = f"probe_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield (
            make_url(url)
            .update_query_dict({"options": f"-csearch_path={schema}"})
            .render_as_string(hide_password=False)
        )
    finally:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(f"DROP SCHEMA {schema} CASCADE")


@asynccontextmanager
async def probe(
    url: str, data_dir: Path, *, archived: int = 0, tune_gc: bool = False, **settings: Any
) -> AsyncIterator[Probe]:
    """A started service on ``url`` (migrated) with the counting provider and a silent platform;
    ``archived`` rows in the probe's session, loaded before the service starts (a long bulk
    insert would hold SQLite's write lock against the service's background loops);
    ``tune_gc``: the collector as ``hygieia run`` sets it after start-up."""
    config = Settings(data_dir=data_dir, database_url=url, allow_all_users=True, **settings)
    counter = StatementCounter()
    provider = StampingProvider(counter)
    adapter = NullAdapter()
    service = await Service.build(config, [adapter], provider=provider)
    # Before start: attached while a task is inside a listener (SQLite's BEGIN awaits the
    # driver), the engine's listener list would change under that task's iteration.
    counter.attach(service.store.db)
    if archived:
        await bulk_archive(service.store.db.engine, (await open_session(service)).id, archived)
    await service.start()
    if tune_gc:
        runner.tune_gc()
    try:
        yield Probe(service, provider, counter, adapter)
    finally:
        # The listeners stay: removing them while a stopping task still runs SQL breaks the
        # event dispatch, and the engine is disposed with the service anyway.
        await service.stop()


async def open_session(service: Service) -> SessionInfo:
    return await service.store.get_or_create_session(
        KEY,
        platform="probe",
        chat_id="c1",
        system_prompt=service.settings.sessions.system_prompt,
        model=service.settings.model,
    )


async def bulk_archive(engine: AsyncEngine, session_id: str, count: int) -> None:
    """``count`` archived rows at the start of the session, generated inside the database (one
    statement: the search index's triggers run as for any insert)."""
    if engine.dialect.name == "sqlite":
        numbers = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count) "
        source = "FROM n"
        true, false = "1", "0"
        content = "json_array(json_object('type', 'text', 'text', 'archived message ' || i))"
    else:
        numbers = ""
        source = "FROM generate_series(1, :count) AS n(i)"
        true, false = "true", "false"
        content = "json_build_array(json_build_object('type', 'text', 'text', 'archived message ' || i))"
    # Archived rows sit before the active ones: negative seqs keep the appended messages' seq = max + 1.
    stmt = text(
        f"{numbers}INSERT INTO messages (session_id, seq, sub_seq, role, content, text, kind, created_at, "
        "active, compacted) "
        f"SELECT :sid, i - :count - 1, 0, CASE WHEN i % 2 = 0 THEN 'assistant' ELSE 'user' END, {content}, "
        f"'archived message ' || i, 'message', :at, {false}, {true} {source}"
    )
    async with engine.begin() as conn:
        await conn.execute(stmt, {"sid": session_id, "count": count, "at": datetime(2026, 1, 1, tzinfo=UTC)})
