"""The database connection: one async engine, its session factory, and SQLite's pragmas."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from agent.errors import ConfigError, StoreError
from gateway.store.fence import check_in
from gateway.store.wal_checkpoints import INTERVAL_SECONDS as CHECKPOINT_SECONDS
from gateway.store.wal_checkpoints import WalCheckpoints

Dialect = Literal["sqlite", "postgresql"]
T = TypeVar("T")
BUSY_TIMEOUT_MS = 15_000
SQLITE_MMAP_BYTES = 256 * 1024 * 1024
SQLITE_CACHE_KIB = 16 * 1024
_WRITE_OPTION = "hygieia_write"
_holds_write_lock: ContextVar[bool] = ContextVar("hygieia_holds_write_lock", default=False)


def parse_url(url: str | URL) -> URL:
    """The URL, checked to name a supported async driver."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"HYGIEIA_DATABASE_URL: not a database URL: {exc}") from None
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise ConfigError(f"HYGIEIA_DATABASE_URL: unsupported database {parsed.get_backend_name()!r}")
    return parsed


IDLE_IN_TRANSACTION_MS = 5000
"""PostgreSQL ends a transaction left idle this long. A worker paused mid-transaction (SIGSTOP, a
stalled VM) would otherwise hold its row and advisory locks past its lease, and no other worker
could take its sessions over: the server cuts it off well inside the default 9 s lease."""


def configure_postgres(engine: AsyncEngine) -> None:
    """Every connection: a transaction left idle ends (:data:`IDLE_IN_TRANSACTION_MS`)."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute(f"SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS}")
        cursor.close()
        dbapi_connection.commit()


def configure_sqlite(engine: AsyncEngine | Engine, *, autocheckpoint: bool = True) -> None:
    """WAL, foreign keys, secure delete, a busy timeout, mmap and a bigger page cache on every connection;
    our own BEGIN. ``autocheckpoint=False``: the log is checkpointed elsewhere
    (:class:`~gateway.store.wal_checkpoints.WalCheckpoints`), never inside a commit.

    The driver's implicit transactions are turned off so that we emit ``BEGIN`` ourselves:
    ``BEGIN IMMEDIATE`` for writes, which takes the write lock up front, so a transaction
    that reads ``max(seq)`` and then inserts cannot lose a race (WAL readers never block).
    """

    sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        if not autocheckpoint:
            cursor.execute("PRAGMA wal_autocheckpoint = 0")
        # Deleted rows are overwritten with zeros, not left readable in free pages: an erasure
        # must leave nothing a reader of the file could find (docs/security.md has the cost).
        cursor.execute("PRAGMA secure_delete = ON")
        # Search reads scattered rows of a large file: map it (no read() per page) and keep
        # more pages per connection than the 2 MB default.
        cursor.execute(f"PRAGMA mmap_size = {SQLITE_MMAP_BYTES}")
        cursor.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
        cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(_WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


class WriteLock:
    """This process's turn at SQLite's single writer: FIFO, except that ``urgent`` waiters
    (the inbox's group commit: a platform waits on it) go before the others.

    Only one task ever waits as urgent (the inbox has one writer task), so the others are
    not starved: at worst urgent and ordinary transactions alternate.
    """

    def __init__(self) -> None:
        self._held = False
        self._urgent: deque[asyncio.Future[None]] = deque()
        self._normal: deque[asyncio.Future[None]] = deque()

    def locked(self) -> bool:
        return self._held

    async def acquire(self, *, urgent: bool = False) -> None:
        if not self._held:
            self._held = True
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        (self._urgent if urgent else self._normal).append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed the lock just as we were cancelled: pass it on
            raise

    def release(self) -> None:
        for queue in (self._urgent, self._normal):
            while queue:
                waiter = queue.popleft()
                if not waiter.done():  # a cancelled waiter is skipped
                    waiter.set_result(None)  # the lock passes to it directly, still held
                    return
        self._held = False

    @asynccontextmanager
    async def hold(self, *, urgent: bool = False) -> AsyncIterator[None]:
        await self.acquire(urgent=urgent)
        try:
            yield
        finally:
            self.release()


class Database:
    """An async engine for ``url`` (``sqlite+aiosqlite://`` or ``postgresql+psycopg://``); on a
    SQLite file the log is checkpointed in the background, ``checkpoint_seconds`` after commits.

    Lifecycle: ``await connect()`` (or ``async with``), then ``await dispose()``.
    """

    def __init__(
        self, url: str | URL, *, echo: bool = False, checkpoint_seconds: float = CHECKPOINT_SECONDS
    ) -> None:
        self.url = parse_url(url)
        self._echo = echo
        self._checkpoint_seconds = checkpoint_seconds
        self._engine: AsyncEngine | None = None
        self._sessionmaker: async_sessionmaker[AsyncSession] | None = None
        # SQLite has one writer at a time. Without this lock concurrent writers all BEGIN
        # IMMEDIATE and the losers sleep in SQLite's busy handler (1, 2, 5 ... 100 ms steps),
        # not woken when the lock frees: the write lock then sits idle while work waits, and
        # throughput collapses as concurrency grows. Queued here, the next writer starts the
        # moment the previous commits. Other processes still meet the busy timeout.
        self._write_lock = WriteLock()
        self._sync_engine: Engine | None = None  # SQLite: whole transactions in one thread hop
        self._sync_engine_lock = threading.Lock()
        self._listeners: list[tuple[str, Callable[..., Any]]] = []
        self._checkpoints: WalCheckpoints | None = None

    @property
    def dialect(self) -> Dialect:
        return "sqlite" if self.url.get_backend_name() == "sqlite" else "postgresql"

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise StoreError("Database.connect() has not been called")
        return self._engine

    @property
    def sessionmaker(self) -> async_sessionmaker[AsyncSession]:
        if self._sessionmaker is None:
            raise StoreError("Database.connect() has not been called")
        return self._sessionmaker

    async def connect(self) -> None:
        """Create the engine and check that the database answers."""
        if self._engine is not None:
            return
        if self.dialect == "sqlite" and self.url.database not in (None, "", ":memory:"):
            await asyncio.to_thread(Path(self.url.database).parent.mkdir, parents=True, exist_ok=True)
        engine = create_async_engine(self.url, echo=self._echo, pool_pre_ping=self.dialect == "postgresql")
        if self.dialect == "sqlite":
            if self._on_file:
                self._checkpoints = WalCheckpoints(
                    str(self.url.database), interval=self._checkpoint_seconds, busy_timeout_ms=BUSY_TIMEOUT_MS
                )
            configure_sqlite(engine, autocheckpoint=self._checkpoints is None)
        elif self.dialect == "postgresql":
            configure_postgres(engine)
        try:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except (OSError, SQLAlchemyError) as exc:
            await engine.dispose()
            raise StoreError(f"cannot connect to the database: {exc}") from exc
        self._engine = engine
        self._sessionmaker = async_sessionmaker(engine, expire_on_commit=False)

    def listen(self, name: str, fn: Callable[..., Any]) -> None:
        """Attach an engine event listener (``before_cursor_execute``, ``begin``, ...) to every
        engine this database runs statements on: the async one and the worker-thread one."""
        self._listeners.append((name, fn))
        for engine in self._engines():
            event.listen(engine, name, fn)

    def unlisten(self, name: str, fn: Callable[..., Any]) -> None:
        """Detach a listener :meth:`listen` attached."""
        self._listeners.remove((name, fn))
        for engine in self._engines():
            event.remove(engine, name, fn)

    def _engines(self) -> list[Engine]:
        with self._sync_engine_lock:
            threaded = [] if self._sync_engine is None else [self._sync_engine]
        return [self.engine.sync_engine, *threaded]

    @property
    def _on_file(self) -> bool:
        return self.dialect == "sqlite" and self.url.database not in (None, "", ":memory:")

    async def truncate_log(self) -> int:
        """SQLite: copy the whole write-ahead log into the database and empty its file (what was
        deleted leaves the log too); 1 when a reader kept it from finishing, else 0. Runs on the
        checkpointer's connection when there is one, so it never overlaps a background checkpoint."""
        if self._checkpoints is not None:
            busy, _, _ = await asyncio.to_thread(self._checkpoints.checkpoint, "TRUNCATE")
            return busy
        async with self.engine.connect() as conn:
            # On the driver's own connection: a checkpoint cannot run inside the BEGIN that
            # SQLAlchemy (and our begin hook) would open around every statement.
            raw = await conn.get_raw_connection()
            driver: Any = raw.driver_connection
            row = await (await driver.execute("PRAGMA wal_checkpoint(TRUNCATE)")).fetchone()
        return int(row[0]) if row else 0

    def _wrote(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.wrote()

    async def dispose(self) -> None:
        if self._checkpoints is not None:
            await self._checkpoints.close()
            self._checkpoints = None
        if self._sync_engine is not None:
            self._sync_engine.dispose()
            self._sync_engine = None
        if self._engine is not None:
            await self._engine.dispose()
        self._engine = None
        self._sessionmaker = None

    async def __aenter__(self) -> Database:
        await self.connect()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.dispose()

    @asynccontextmanager
    async def transaction(self, *, write: bool = True, urgent: bool = False) -> AsyncIterator[AsyncSession]:
        """A session inside one transaction, committed on exit, rolled back on error.

        ``write=True`` takes SQLite's write lock at BEGIN (after this process's own writers,
        in order, ``urgent`` ones first: see :class:`WriteLock`); PostgreSQL ignores it.
        """
        if write and self.dialect == "sqlite" and not _holds_write_lock.get():
            async with self._write_lock.hold(urgent=urgent):
                token = _holds_write_lock.set(True)
                try:
                    async with self._transaction(write=True) as session:
                        yield session
                finally:
                    _holds_write_lock.reset(token)
            self._wrote()
            return
        async with self._transaction(write=write) as session:
            yield session

    async def write_at_once(self, work: Callable[[Connection], T], *, urgent: bool = False) -> T:
        """Run ``work`` (synchronous SQLAlchemy Core on a connection) in one write transaction.

        On a SQLite file the whole transaction runs in one worker-thread call: the async driver
        hands every statement, BEGIN and COMMIT to its thread and back (~0.5 ms of CPU each
        here), which is most of the cost of a short transaction. Writers of this process still
        queue on the write lock first. Cancelled while running, the transaction still finishes
        in its thread (committed or not); its callers are told it failed, so nothing is
        acknowledged that might not be stored. Elsewhere: the async session, run synchronously.
        """
        if self._on_file:
            if _holds_write_lock.get():
                raise StoreError("write_at_once inside another write transaction")
            async with self._write_lock.hold(urgent=urgent):
                result = await asyncio.to_thread(self._sync_write, work)
            self._wrote()
            return result
        async with self.transaction(urgent=urgent) as session:
            return await session.run_sync(lambda sync: work(sync.connection()))

    async def read_at_once(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` (synchronous SQLAlchemy Core on a connection) in one read transaction.

        On a SQLite file the whole transaction is one worker-thread call, as in
        :meth:`write_at_once` but with no write lock (WAL readers never wait): a read of a few
        statements pays one thread hop instead of one per statement. Elsewhere: the async
        session, run synchronously (its statements still go through the async driver).
        """
        if self._on_file:
            return await asyncio.to_thread(self._sync_run, work, write=False)
        async with self.transaction(write=False) as session:
            return await session.run_sync(lambda sync: work(sync.connection()))

    def _sync_write(self, work: Callable[[Connection], T]) -> T:
        return self._sync_run(work, write=True)

    def _sync_run(self, work: Callable[[Connection], T], *, write: bool) -> T:
        with self._sync_engine_lock:  # readers may get here at once, from several threads
            if self._sync_engine is None:
                # Same file, same pragmas and BEGIN; threads of the default executor share it.
                engine = create_engine(
                    self.url.set(drivername="sqlite"), connect_args={"check_same_thread": False}
                )
                configure_sqlite(engine, autocheckpoint=self._checkpoints is None)
                for name, fn in self._listeners:
                    event.listen(engine, name, fn)
                self._sync_engine = engine
            sync_engine = self._sync_engine
        with sync_engine.connect() as conn:
            conn = conn.execution_options(**{_WRITE_OPTION: write})
            with conn.begin():
                return work(conn)

    @asynccontextmanager
    async def _transaction(self, *, write: bool) -> AsyncIterator[AsyncSession]:
        async with self.sessionmaker() as session, session.begin():
            await session.connection(execution_options={_WRITE_OPTION: write})
            if write and self.dialect == "postgresql":
                await check_in(session)  # a turn that lost its session lease writes nothing
            yield session
