"""Named leases (the cluster-once primitive) on every engine."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from gateway.store.db import Database
from gateway.store.repository import Store
from tests.store.engines import only

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


# Time moved by hand: PostgreSQL judges leases by its own clock (tests/store/test_lease_clock.py).
@only("sqlite")
async def test_a_free_lease_is_taken_and_a_live_one_is_refused(store: Store) -> None:
    first = await store.lease_acquire("leader", "w1", ttl_seconds=30, now=T0)
    second = await store.lease_acquire("leader", "w2", ttl_seconds=30, now=T0 + timedelta(seconds=29))

    assert first is not None and (first.owner, first.generation) == ("w1", 1)
    assert first.expires_at == T0 + timedelta(seconds=30)
    assert second is None


# Time moved by hand: PostgreSQL judges leases by its own clock (tests/store/test_lease_clock.py).
@only("sqlite")
async def test_an_expired_lease_goes_to_the_next_taker_with_a_higher_generation(store: Store) -> None:
    await store.lease_acquire("leader", "w1", ttl_seconds=30, now=T0)

    taken = await store.lease_acquire("leader", "w2", ttl_seconds=30, now=T0 + timedelta(seconds=31))
    renewed_by_old_owner = await store.lease_renew(
        "leader", "w1", ttl_seconds=30, now=T0 + timedelta(seconds=32)
    )

    assert taken is not None and (taken.owner, taken.generation) == ("w2", 2)
    assert renewed_by_old_owner is None
    held = await store.lease_get("leader")
    assert held is not None and held.owner == "w2"


# Time moved by hand: PostgreSQL judges leases by its own clock (tests/store/test_lease_clock.py).
@only("sqlite")
async def test_renewing_extends_the_lease_and_keeps_its_generation(store: Store) -> None:
    await store.lease_acquire("leader", "w1", ttl_seconds=30, now=T0)

    renewed = await store.lease_renew("leader", "w1", ttl_seconds=30, now=T0 + timedelta(seconds=20))
    refused = await store.lease_acquire("leader", "w2", ttl_seconds=30, now=T0 + timedelta(seconds=40))

    assert renewed is not None and renewed.generation == 1
    assert renewed.expires_at == T0 + timedelta(seconds=50)
    assert refused is None


async def test_a_released_lease_is_free_at_once_and_only_its_owner_can_release_it(store: Store) -> None:
    await store.lease_acquire("leader", "w1", ttl_seconds=300, now=T0)

    by_stranger = await store.lease_release("leader", "w2", now=T0 + timedelta(seconds=1))
    by_owner = await store.lease_release("leader", "w1", now=T0 + timedelta(seconds=1))
    taken = await store.lease_acquire("leader", "w2", ttl_seconds=300, now=T0 + timedelta(seconds=2))

    assert (by_stranger, by_owner) == (False, True)
    assert taken is not None and (taken.owner, taken.generation) == ("w2", 2)


async def test_renewing_a_lease_never_taken_fails(store: Store) -> None:
    assert await store.lease_renew("nobody", "w1", ttl_seconds=30) is None
    assert await store.lease_get("nobody") is None


async def test_leases_are_listed_by_prefix(store: Store) -> None:
    for name in ("job:sweep", "job:tasks", "intake"):
        await store.lease_acquire(name, "w1", ttl_seconds=30, now=T0)

    assert [lease.name for lease in await store.lease_list("job:")] == ["job:sweep", "job:tasks"]


async def test_of_many_workers_taking_a_lease_at_once_exactly_one_gets_it(database: Database) -> None:
    # One Database (pool) per worker, as separate processes would have.
    workers = [Database(database.url) for _ in range(6)]
    for db in workers:
        await db.connect()
    try:
        results = await asyncio.gather(
            *(
                Store(db).lease_acquire("leader", f"w{i}", ttl_seconds=30, now=T0)
                for i, db in enumerate(workers)
            )
        )
    finally:
        for db in workers:
            await db.dispose()

    winners = [r for r in results if r is not None]
    assert len(winners) == 1 and winners[0].generation == 1


@only("postgresql")
async def test_on_postgresql_a_lease_expires_by_the_database_clock_and_goes_on_with_a_higher_generation(
    store: Store,
) -> None:
    first = await store.lease_acquire("leader", "w1", ttl_seconds=0.5)
    assert first is not None and await store.lease_acquire("leader", "w2", ttl_seconds=30) is None
    taken = None
    for _ in range(100):  # until the database's clock passes the expiry
        taken = await store.lease_acquire("leader", "w2", ttl_seconds=30)
        if taken is not None:
            break
        await asyncio.sleep(0.05)
    assert taken is not None and (taken.owner, taken.generation) == ("w2", 2)
    assert await store.lease_renew("leader", "w1", ttl_seconds=30) is None
