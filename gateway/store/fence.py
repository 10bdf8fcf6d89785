"""Fencing: a turn whose session lease is lost writes nothing.

A worker serves a session while it holds the session's inbox claims (``inbox.lease_owner`` and
``lease_until``, renewed while the turn runs). A worker that was paused past its lease (a long GC,
SIGSTOP, a VM migration) or that could not renew may wake up in the middle of a turn that another
worker has already taken over. Every write transaction made inside :func:`holding` first checks, in
that transaction, that this worker still holds a live claim on the session, and locks that claim
row (``FOR UPDATE``) so that no other worker can take it before the write commits (claims skip
locked rows). When the check fails the transaction is refused with :class:`LeaseLost` and the turn
is left to the new owner.

The fence is a context variable so that the agent's own writes (messages stored as the model
produces them) are fenced without the agent knowing about leases; tasks started inside the block
inherit it. PostgreSQL only: SQLite serves one process, where the per-session lock already
serializes turns.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.errors import StoreError
from gateway.store.models import inbox


class LeaseLost(StoreError):
    """This worker no longer holds the session it was writing for: the write is refused."""


@dataclass(frozen=True, slots=True)
class Fence:
    """The claim a turn's writes depend on: ``worker`` holds live inbox items of ``session_key``."""

    worker: str
    session_key: str


_current: ContextVar[Fence | None] = ContextVar("hygieia_fence", default=None)


@contextmanager
def holding(worker: str, session_key: str) -> Iterator[Fence]:
    """Fence every write transaction made in this block (and in tasks started from it)."""
    fence = Fence(worker, session_key)
    token = _current.set(fence)
    try:
        yield fence
    finally:
        _current.reset(token)


def current() -> Fence | None:
    """The fence of the running code, if any."""
    return _current.get()


async def check_in(s: AsyncSession) -> None:
    """Refuse the transaction ``s`` unless the current fence's claim is still live and ours."""
    fence = _current.get()
    if fence is None:
        return
    held = (
        select(inbox.c.id)
        .where(
            inbox.c.session_key == fence.session_key,
            inbox.c.status == "processing",
            inbox.c.lease_owner == fence.worker,
            # The database's clock, as the claims that take a session over judge by.
            inbox.c.lease_until > func.clock_timestamp(),
        )
        .limit(1)
        .with_for_update()
    )
    if await s.scalar(held) is None:
        raise LeaseLost(f"lost the lease on {fence.session_key}; the write is refused")
