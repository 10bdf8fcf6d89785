"""Memory-tool files: one row per (scope, path); directories are path prefixes.

Paths arrive normalized by the caller (``/memories/...``, no trailing slash).
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError

from agent.clock import utcnow
from agent.errors import StoreError
from agent.types import MemoryEntry
from gateway.store.base import CONFLICT_RETRIES, Repo
from gateway.store.columns import clean_text, rows_changed
from gateway.store.models import memories


def _strip(path: str) -> str:
    return path.rstrip("/") or "/"


def _under(path: str) -> ColumnElement[bool]:
    """Rows strictly inside directory ``path`` (a prefix test without LIKE's wildcards)."""
    prefix = path if path.endswith("/") else path + "/"
    return func.substr(memories.c.path, 1, len(prefix)) == prefix


def _at_or_under(path: str) -> ColumnElement[bool]:
    return or_(memories.c.path == path, _under(path))


class MemoryOps(Repo):
    async def memory_list(self, scope: str, prefix: str = "/memories") -> list[MemoryEntry]:
        prefix = _strip(prefix)
        stmt = (
            select(memories.c.path, memories.c.content, memories.c.updated_at)
            .where(memories.c.scope == scope, _at_or_under(prefix))
            .order_by(memories.c.path)
        )
        async with self._tx(write=False) as s:
            return [MemoryEntry(path=p, content=c, updated_at=u) for p, c, u in (await s.execute(stmt))]

    async def memory_get(self, scope: str, path: str) -> MemoryEntry | None:
        stmt = select(memories.c.path, memories.c.content, memories.c.updated_at).where(
            memories.c.scope == scope, memories.c.path == path
        )
        async with self._tx(write=False) as s:
            row = (await s.execute(stmt)).first()
            return None if row is None else MemoryEntry(path=row[0], content=row[1], updated_at=row[2])

    async def memory_put(self, scope: str, path: str, content: str) -> None:
        content = clean_text(content)
        for _ in range(CONFLICT_RETRIES):
            try:
                async with self._tx() as s:
                    now = utcnow()
                    changed = await s.execute(
                        update(memories)
                        .where(memories.c.scope == scope, memories.c.path == path)
                        .values(content=content, updated_at=now)
                    )
                    if rows_changed(changed) == 0:
                        await s.execute(
                            memories.insert().values(scope=scope, path=path, content=content, updated_at=now)
                        )
                return
            except IntegrityError:
                continue  # created concurrently: the next pass updates it
        raise StoreError(f"could not write memory {path}")

    async def memory_delete(self, scope: str, path: str) -> int:
        path = _strip(path)
        async with self._tx() as s:
            result = await s.execute(delete(memories).where(memories.c.scope == scope, _at_or_under(path)))
            return rows_changed(result)

    async def memory_rename(self, scope: str, old_path: str, new_path: str) -> int:
        """Move a file, or every file under a directory; refuses to overwrite existing files."""
        old_path, new_path = _strip(old_path), _strip(new_path)
        if old_path == new_path:
            return 0
        if _strip(new_path).startswith(old_path + "/"):
            raise StoreError(f"cannot move {old_path} inside itself")
        async with self._tx() as s:
            rows = (
                await s.execute(
                    select(memories.c.id, memories.c.path).where(
                        memories.c.scope == scope, _at_or_under(old_path)
                    )
                )
            ).all()
            moves = {rid: new_path + p[len(old_path) :] for rid, p in rows}
            if moves:
                taken = await s.scalar(
                    select(func.count()).where(memories.c.scope == scope, memories.c.path.in_(moves.values()))
                )
                if taken:
                    raise StoreError(f"cannot move {old_path} to {new_path}: the destination exists")
            now = utcnow()
            for rid, target in moves.items():
                await s.execute(
                    update(memories).where(memories.c.id == rid).values(path=target, updated_at=now)
                )
            return len(moves)
