"""A database filled through the store (a session whose first turns were compacted into the archive)
and the environment a child ``hygieia mcp serve`` reads it from."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from agent.types import ChatMessage, CompactionPlan, Insertion
from gateway.store.db import Database
from gateway.store.repository import Store
from tests.process_env import clean_env
from tests.store.engines import POSTGRES_URL

RARE_WORD = "quetzalcoatlus"
TOKEN = "archive-token-" + "x" * 24
WORDS = [f"{RARE_WORD} flew over the ridge", "reply one", "second question", "reply two"]
WORDS += [f"later message {i}" for i in range(8)]


@dataclass(frozen=True)
class Archive:
    env: dict[str, str]
    session_id: str
    ids: list[int]
    """Every stored message id in order (the first two are archived)."""


async def _seed(url: str) -> tuple[str, list[int]]:
    db = Database(url)
    await db.connect()
    try:
        store = Store(db)
        info = await store.get_or_create_session(
            "console:alice", platform="console", chat_id="alice", system_prompt="sys", model="m"
        )
        ids = []
        for i, text in enumerate(WORDS):
            stored = await store.append_message(
                info.id,
                ChatMessage(
                    role="user" if i % 2 == 0 else "assistant", content=[{"type": "text", "text": text}]
                ),
            )
            assert stored.id is not None
            ids.append(stored.id)
        await store.archive_and_summarize(
            info.id,
            CompactionPlan(
                trigger="manual",
                archive_ids=tuple(ids[:2]),
                insertions=(
                    Insertion(anchor_id=ids[0], message=ChatMessage.user("summary", kind="summary")),
                ),
                first_kept_id=ids[2],
                tokens_before=100,
                tokens_after=40,
                model="m",
                duration_ms=3,
            ),
        )
        return info.id, ids
    finally:
        await db.dispose()


def _filled(env: dict[str, str], url: str) -> Archive:
    env = {**env, "HYGIEIA_DATABASE_URL": url}
    migrated = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "migrate"], env=env, capture_output=True, text=True, timeout=120
    )
    assert migrated.returncode == 0, migrated.stderr
    session_id, ids = asyncio.run(_seed(url))
    return Archive(env=env, session_id=session_id, ids=ids)


def _env(tmp_path: Path) -> dict[str, str]:
    env = clean_env()
    env["HYGIEIA_DATA_DIR"] = str(tmp_path / "data")
    return env


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    """The archive on SQLite, in the data directory."""
    return _filled(_env(tmp_path), f"sqlite+aiosqlite:///{tmp_path / 'data' / 'hygieia.db'}")


@pytest.fixture
def pg_archive(tmp_path: Path) -> Iterator[Archive]:
    """The archive on PostgreSQL, in a schema of its own (dropped afterwards)."""
    if POSTGRES_URL is None:
        pytest.skip("HYGIEIA_TEST_POSTGRES_URL not set")
    schema = f"archive_{uuid.uuid4().hex[:12]}"
    sync_url = make_url(POSTGRES_URL)
    engine = create_engine(sync_url)
    with engine.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        url = sync_url.update_query_dict({"options": f"-csearch_path={schema}"})
        yield _filled(_env(tmp_path), url.render_as_string(False))
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


def answer(result: types.CallToolResult) -> dict[str, Any]:
    """A tool's JSON answer (the call must have succeeded)."""
    assert not result.is_error, result.content
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    value = json.loads(block.text)
    assert isinstance(value, dict)
    return value


def error_text(result: types.CallToolResult) -> str:
    assert result.is_error
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text
