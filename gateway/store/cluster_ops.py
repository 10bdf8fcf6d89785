"""What the cluster view reads: which worker holds which session's inbox items right now."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select

from gateway.store.base import Repo
from gateway.store.models import inbox


@dataclass(frozen=True, slots=True)
class SessionClaim:
    """A session being served: the worker that claimed its items, how many, and until when."""

    session_key: str
    worker: str
    items: int
    lease_until: datetime


class ClusterOps(Repo):
    async def session_claims(self, now: datetime | None = None, limit: int = 1000) -> list[SessionClaim]:
        """Live claims (status processing, lease not run out), one row per session and worker."""
        at = self.lease_clock() if now is None else now
        stmt = (
            select(
                inbox.c.session_key,
                inbox.c.lease_owner,
                func.count().label("items"),
                func.max(inbox.c.lease_until).label("until"),
            )
            .where(
                inbox.c.status == "processing", inbox.c.lease_until >= at, inbox.c.lease_owner.is_not(None)
            )
            .group_by(inbox.c.session_key, inbox.c.lease_owner)
            .order_by(inbox.c.session_key)
            .limit(limit)
        )
        async with self._tx(write=False) as s:
            rows = (await s.execute(stmt)).all()
        return [SessionClaim(str(k), str(w), int(n), until) for k, w, n, until in rows]
