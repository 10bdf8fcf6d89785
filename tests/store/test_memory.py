"""Memory files per scope: put/get/list, directory delete and rename by prefix."""

from __future__ import annotations

import pytest

from agent.errors import StoreError
from gateway.store.repository import Store


async def paths(store: Store, scope: str = "s", prefix: str = "/memories") -> list[str]:
    return [e.path for e in await store.memory_list(scope, prefix)]


async def test_put_get_and_overwrite(store: Store) -> None:
    await store.memory_put("s", "/memories/a.md", "one")
    await store.memory_put("s", "/memories/a.md", "two")
    entry = await store.memory_get("s", "/memories/a.md")
    assert entry is not None and entry.content == "two" and entry.updated_at is not None
    assert await store.memory_get("s", "/memories/missing.md") is None
    assert await store.memory_get("other", "/memories/a.md") is None


async def test_list_is_scoped_sorted_and_prefix_exact(store: Store) -> None:
    for path in ("/memories/b.md", "/memories/dir/x.md", "/memories/dirx.md", "/memories/a.md"):
        await store.memory_put("s", path, path)
    await store.memory_put("other", "/memories/z.md", "z")
    assert await paths(store) == [
        "/memories/a.md",
        "/memories/b.md",
        "/memories/dir/x.md",
        "/memories/dirx.md",
    ]
    assert await paths(store, prefix="/memories/dir") == ["/memories/dir/x.md"]
    assert await paths(store, prefix="/memories/dir/") == ["/memories/dir/x.md"]


async def test_like_wildcards_in_paths_are_literal(store: Store) -> None:
    await store.memory_put("s", "/memories/%_/a.md", "x")
    await store.memory_put("s", "/memories/ab/b.md", "y")
    assert await paths(store, prefix="/memories/%_") == ["/memories/%_/a.md"]


async def test_delete_file_or_directory(store: Store) -> None:
    for path in ("/memories/d/1.md", "/memories/d/2.md", "/memories/d2.md", "/memories/e.md"):
        await store.memory_put("s", path, "x")
    assert await store.memory_delete("s", "/memories/d") == 2
    assert await store.memory_delete("s", "/memories/e.md") == 1
    assert await store.memory_delete("s", "/memories/nothing") == 0
    assert await paths(store) == ["/memories/d2.md"]


async def test_rename_file_and_directory(store: Store) -> None:
    await store.memory_put("s", "/memories/old/1.md", "one")
    await store.memory_put("s", "/memories/old/sub/2.md", "two")
    await store.memory_put("s", "/memories/f.md", "f")
    assert await store.memory_rename("s", "/memories/old", "/memories/new") == 2
    assert await store.memory_rename("s", "/memories/f.md", "/memories/g.md") == 1
    assert await paths(store) == ["/memories/g.md", "/memories/new/1.md", "/memories/new/sub/2.md"]
    moved = await store.memory_get("s", "/memories/new/sub/2.md")
    assert moved is not None and moved.content == "two"


async def test_rename_refuses_to_overwrite(store: Store) -> None:
    await store.memory_put("s", "/memories/a.md", "a")
    await store.memory_put("s", "/memories/b.md", "b")
    with pytest.raises(StoreError, match="exists"):
        await store.memory_rename("s", "/memories/a.md", "/memories/b.md")
    assert (await store.memory_get("s", "/memories/a.md")) is not None
