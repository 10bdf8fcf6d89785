"""Plumbing shared by the parts of :class:`gateway.store.repository.Store`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

from sqlalchemy import exists, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from gateway.store.db import Database
from gateway.store.models import sessions
from gateway.store.view_cache import ActiveViews

T = TypeVar("T")
CONFLICT_RETRIES = 8
"""How often a write that lost a race (unique conflict, stale version) is tried again."""
CHUNK = 500
"""Ids per ``IN (...)`` list: far below SQLite's and PostgreSQL's parameter limits."""


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def unique(items: Iterable[T]) -> list[T]:
    """``items`` without repeats, first occurrence kept."""
    return list(dict.fromkeys(items))


class Repo:
    """One part of the store; all parts share the same :class:`Database`."""

    def __init__(self, db: Database, views: ActiveViews | None = None) -> None:
        self._db = db
        # The active views this store has read or written (``gateway.store.view_cache``).
        self._views = views if views is not None else ActiveViews()

    @property
    def db(self) -> Database:
        return self._db

    def _tx(self, *, write: bool = True) -> AbstractAsyncContextManager[AsyncSession]:
        return self._db.transaction(write=write)

    async def _session_exists(self, session_id: str) -> bool:
        async with self._tx(write=False) as s:
            found = await s.scalar(select(exists().where(sessions.c.id == session_id)))
            return bool(found)


async def bump_view(s: AsyncSession, *session_ids: str) -> None:
    """The active set of these sessions changes in this transaction: move their ``view_version``
    on, so that no worker's cached view of them is used again (``gateway.store.view_cache``)."""
    for part in chunks(sorted(set(session_ids))):
        await s.execute(
            update(sessions).where(sessions.c.id.in_(part)).values(view_version=sessions.c.view_version + 1)
        )
