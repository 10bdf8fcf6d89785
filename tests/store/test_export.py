"""A session exported as JSONL comes back whole in a fresh database; Markdown reads as a transcript."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.errors import StoreError
from agent.types import ChatMessage
from gateway.admin.export import ExportFormatError, from_jsonl, to_jsonl, to_markdown
from gateway.store.db import Database
from gateway.store.migrate import upgrade_to_head
from gateway.store.repository import Store
from tests.gateway.admin_support import XSS, seed


def view(messages: list[ChatMessage]) -> list[tuple[Any, ...]]:
    return [(m.role, m.kind, m.content, m.author_id, m.author_name, m.created_at) for m in messages]


async def fresh_store(tmp_path: Path) -> tuple[Database, Store]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    await upgrade_to_head(url)
    db = Database(url)
    await db.connect()
    return db, Store(db)


async def test_jsonl_round_trips_into_a_fresh_database_with_the_same_active_view(
    store: Store, tmp_path: Path
) -> None:
    seeded = await seed(store)
    await store.restore_latest_compaction(seeded.session_id)  # a retired summary travels too
    exported = await store.export_session(seeded.session_id)
    lines = list(to_jsonl(exported))
    db, fresh = await fresh_store(tmp_path)
    try:
        assert await fresh.import_session(from_jsonl(lines)) == seeded.session_id
        assert view(await fresh.load_active(seeded.session_id)) == view(
            await store.load_active(seeded.session_id)
        )
        every = await fresh.messages_page(seeded.session_id, limit=1000)
        original = await store.messages_page(seeded.session_id, limit=1000)
        assert [(m.text, m.active, m.compacted) for m in every.messages] == [
            (m.text, m.active, m.compacted) for m in original.messages
        ]
        before, after = (
            await store.list_compactions(seeded.session_id),
            await fresh.list_compactions(seeded.session_id),
        )
        assert [(c.id, c.trigger, c.restored_at) for c in after] == [
            (c.id, c.trigger, c.restored_at) for c in before
        ]
        summary = next(m for m in every.messages if m.kind == "summary")
        assert after[0].summary_message_id == summary.id  # the reference follows the new ids
        again = list(to_jsonl(await fresh.export_session(seeded.session_id)))
        assert len(again) == len(lines) and again[0] == lines[0]
    finally:
        await db.dispose()


async def test_importing_a_session_that_is_already_there_is_refused(store: Store) -> None:
    seeded = await seed(store)
    exported = await store.export_session(seeded.session_id)
    with pytest.raises(StoreError, match="already in this database"):
        await store.import_session(exported)


@pytest.mark.parametrize(
    "text",
    ["", "not json\n", '{"type": "message"}\n', '{"type": "session", "format": "other/9"}\n'],
)
def test_a_file_that_is_not_an_export_says_which_line(text: str) -> None:
    with pytest.raises(ExportFormatError):
        from_jsonl(text.splitlines(keepends=True))


async def test_markdown_marks_archived_runs_and_each_compaction_where_its_summary_sits(store: Store) -> None:
    seeded = await seed(store)
    md = to_markdown(await store.export_session(seeded.session_id))
    assert md.startswith("# telegram:100\n")
    assert "*— archived by compaction 1 (hygiene," in md and "*— end of archived messages —*" in md
    assert "## Compaction 2 · manual ·" in md and "> second summary" in md
    assert md.index("message 0") < md.index("## Compaction 2") < md.index("later 2")
    assert f"please render {XSS} safely" in md  # Markdown is text: nothing to escape, nothing lost


def under_new_id(data: Any, new_id: str) -> Any:
    """The same export as another session of the same chat (as a backup from another database is)."""
    data.session["id"] = new_id
    renamed = {c["id"]: new_id[:-2] + f"{n:02d}" for n, c in enumerate(data.compactions)}
    for row in (*data.compactions, *data.messages):
        row["session_id"] = new_id
        for ref in ("id", "compaction_id", "produced_by"):
            if isinstance(row.get(ref), str):
                row[ref] = renamed.get(row[ref], row[ref])
    return data


async def test_importing_compactions_that_are_already_here_is_refused(store: Store) -> None:
    seeded = await seed(store)
    data = await store.export_session(seeded.session_id)
    data.session["id"] = "c" * 32
    data.session["ended_at"] = data.session["created_at"]
    for row in (*data.compactions, *data.messages):
        row["session_id"] = "c" * 32
    with pytest.raises(StoreError, match=r"compaction \w+ is already in this database"):
        await store.import_session(data)


async def test_importing_over_a_live_chat_is_refused_and_writes_nothing(store: Store) -> None:
    seeded = await seed(store)
    data = under_new_id(await store.export_session(seeded.session_id), "b" * 32)
    with pytest.raises(StoreError, match="live session") as caught:
        await store.import_session(data)
    assert "--replace" in str(caught.value)
    assert [s.id for s in await store.list_sessions()] == [seeded.session_id]
    assert not (await store.get_session(seeded.session_id)).ended


async def test_importing_over_a_live_chat_with_replace_ends_the_live_session(store: Store) -> None:
    seeded = await seed(store)
    data = under_new_id(await store.export_session(seeded.session_id), "b" * 32)
    key = data.session["key"]
    assert await store.import_session(data, replace=True) == "b" * 32
    old = await store.get_session(seeded.session_id)
    current = await store.current_session(key)
    assert old.ended and old.end_reason == "replaced"
    assert current is not None and current.id == "b" * 32
