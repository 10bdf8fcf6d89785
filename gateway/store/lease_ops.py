"""Named leases: at most one live owner per name, across every worker on the database.

A lease is a row with an owner and an expiry. Taking it succeeds when nobody holds it, its
holder's time ran out, or the taker already holds it (then it is extended). A worker that
dies simply stops renewing, and its lease is free once it expires: nothing ever waits on a
dead process. ``generation`` grows each time the lease changes hands (a fencing token: work
stamped with an older generation is stale).

Taking or renewing a lease is a read-modify-write, serialized per name: on PostgreSQL by a
transaction-scoped advisory lock on the name (no row need exist yet to lock it, and it is
released with the transaction, so a crash cannot leave it held), on SQLite by ``BEGIN
IMMEDIATE``. The same serialization lets a caller combine a lease with its own bookkeeping
in one transaction (see :mod:`gateway.store.job_ops`).

Times come from the database's clock on PostgreSQL, read in the lease's own transaction
(:meth:`gateway.store.base.Repo.lease_now`): nodes whose clocks disagree still agree on who
holds what. A ``now`` argument is the caller's clock: it counts on SQLite only (one process).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy import RowMapping, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from gateway.store.base import Repo
from gateway.store.columns import rows_changed
from gateway.store.models import leases

MAX_NAME = 128


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease as stored; ``live(now)`` says whether it still binds."""

    name: str
    owner: str
    generation: int
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime

    def live(self, now: datetime) -> bool:
        return self.expires_at > now


def _lease(row: RowMapping) -> Lease:
    return Lease(**row)


async def _get(s: AsyncSession, name: str) -> Lease | None:
    row = (await s.execute(select(leases).where(leases.c.name == name))).mappings().first()
    return None if row is None else _lease(row)


async def serialize(s: AsyncSession, dialect: str, key: str) -> None:
    """Serialize transactions that name ``key`` until this one ends (PostgreSQL advisory lock;
    SQLite's write transactions are serialized already)."""
    if dialect == "postgresql":
        await s.execute(select(func.pg_advisory_xact_lock(func.hashtextextended(f"lease:{key}", 0))))


async def acquire_in(
    s: AsyncSession, dialect: str, name: str, owner: str, *, ttl_seconds: float, now: datetime
) -> Lease | None:
    """:meth:`LeaseOps.lease_acquire` inside the caller's (write) transaction."""
    if len(name) > MAX_NAME:
        raise ValueError(f"lease name longer than {MAX_NAME} characters: {name[:40]!r}...")
    await serialize(s, dialect, name)
    current = await _get(s, name)
    expires = now + timedelta(seconds=ttl_seconds)
    if current is None:
        lease = Lease(name, owner, 1, now, now, expires)
        await s.execute(insert(leases).values(**asdict(lease)))
        return lease
    if current.owner == owner:
        # Still ours (or expired with nobody taking it): extend, same generation.
        lease = replace(current, renewed_at=now, expires_at=max(expires, current.expires_at))
    elif not current.live(now):
        lease = Lease(name, owner, current.generation + 1, now, now, expires)
    else:
        return None
    await s.execute(update(leases).where(leases.c.name == name).values(**asdict(lease)))
    return lease


async def release_in(s: AsyncSession, name: str, owner: str, *, now: datetime) -> bool:
    """:meth:`LeaseOps.lease_release` inside the caller's transaction.

    The row stays (expired now), so the next owner's generation is still one higher.
    """
    result = await s.execute(
        update(leases)
        .where(leases.c.name == name, leases.c.owner == owner, leases.c.expires_at > now)
        .values(expires_at=now)
    )
    return bool(rows_changed(result))


class LeaseOps(Repo):
    """Acquire, renew, release and inspect named leases (the cluster-once primitive)."""

    async def lease_acquire(
        self, name: str, owner: str, *, ttl_seconds: float, now: datetime | None = None
    ) -> Lease | None:
        """Take ``name`` for ``owner`` for ``ttl_seconds``; ``None`` while another owner's lease is live.

        Taking a lease one already holds extends it (never shortens it) and keeps its generation.
        """
        async with self._tx() as s:
            await serialize(s, self.db.dialect, name)
            at = await self.lease_now(s, now)
            return await acquire_in(s, self.db.dialect, name, owner, ttl_seconds=ttl_seconds, now=at)

    async def lease_renew(
        self, name: str, owner: str, *, ttl_seconds: float, now: datetime | None = None
    ) -> Lease | None:
        """Extend ``owner``'s lease; ``None`` when it no longer holds it (it expired and was taken,
        or was released). A lease that expired but that nobody took is renewed: no one else acted on it."""
        async with self._tx() as s:
            await serialize(s, self.db.dialect, name)
            current = await _get(s, name)
            if current is None or current.owner != owner:
                return None
            at = await self.lease_now(s, now)
            return await acquire_in(s, self.db.dialect, name, owner, ttl_seconds=ttl_seconds, now=at)

    async def lease_release(self, name: str, owner: str, *, now: datetime | None = None) -> bool:
        """Give the lease up at once (only its owner can); False when ``owner`` did not hold it live."""
        async with self._tx() as s:
            await serialize(s, self.db.dialect, name)
            return await release_in(s, name, owner, now=await self.lease_now(s, now))

    async def lease_get(self, name: str) -> Lease | None:
        """The lease row, live, expired or released (check :meth:`Lease.live` against
        :meth:`~gateway.store.base.Repo.db_now`); ``None`` when never taken."""
        async with self._tx(write=False) as s:
            return await _get(s, name)

    async def lease_list(self, prefix: str = "") -> list[Lease]:
        """Every lease whose name starts with ``prefix``, by name."""
        stmt = select(leases).order_by(leases.c.name)
        if prefix:
            stmt = stmt.where(leases.c.name.startswith(prefix, autoescape=True))
        async with self._tx(write=False) as s:
            return [_lease(r) for r in (await s.execute(stmt)).mappings()]

    async def lease_prune(self, prefix: str, expired_before: datetime) -> int:
        """Delete leases named ``prefix...`` that expired before ``expired_before``; how many.

        Only for names that are never taken again (node heartbeats carry a process id), since
        a deleted lease restarts its generation at 1."""
        async with self._tx() as s:
            result = await s.execute(
                delete(leases).where(
                    leases.c.name.startswith(prefix, autoescape=True), leases.c.expires_at < expired_before
                )
            )
            return rows_changed(result)
