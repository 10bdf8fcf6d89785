"""A session exported as JSONL comes back whole in a fresh database; Markdown reads as a transcript."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.errors import StoreError
from agent.types import ChatMessage
from gateway.export import ExportFormatError, from_jsonl, to_jsonl, to_markdown
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
