"""``hygieia sessions list`` finds what the admin API finds: the same filters, sort orders and paging,
through the real entry point (a subprocess), on every available engine."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent.types import ChatMessage
from gateway.store.db import Database
from gateway.store.repository import Store
from tests.conftest import migrated
from tests.gateway.cli.test_cli import hygieia
from tests.process_env import clean_env

# (key, platform, chat, user, last activity day in November, messages)
SESSIONS = [
    ("telegram:dm:42", "telegram", "42", "42", 3, 2),
    ("telegram:group:-100", "telegram", "-100", None, 20, 6),
    ("discord:dm:7", "discord", "7", "7", 25, 4),
    ("discord:channel:900", "discord", "900", None, 10, 1),
]


async def _seed(url: str) -> dict[str, str]:
    """The sessions above, keyed by session key; user 42 also wrote in the Telegram group."""
    db = Database(url)
    await db.connect()
    try:
        store = Store(db)
        ids: dict[str, str] = {}
        for key, platform, chat, user, day, count in SESSIONS:
            info = await store.get_or_create_session(
                key, platform=platform, chat_id=chat, user_id=user, system_prompt="sys", model="m"
            )
            for i in range(count):
                author = "42" if key == "telegram:group:-100" and i == 0 else user
                text = f"{key} message {i}"
                if i % 2 == 0:
                    message = ChatMessage.user(text, author_id=author)
                else:
                    message = ChatMessage.assistant(text)
                await store.append_message(info.id, message)
            await store.touch_session(info.id, datetime(2026, 11, day, 12, tzinfo=UTC))
            ids[key] = info.id
        return ids
    finally:
        await db.dispose()


@pytest.fixture
async def seeded(db_url: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    await migrated(db_url, tmp_path_factory.getbasetemp())
    return await _seed(db_url)


def _env(db_url: str, tmp_path: Path) -> dict[str, str]:
    env = clean_env()
    env["HYGIEIA_DATA_DIR"] = str(tmp_path / "data")
    env["HYGIEIA_DATABASE_URL"] = db_url
    env["COLUMNS"] = "200"
    return env


def _keys(db_url: str, tmp_path: Path, *args: str) -> list[str]:
    result = hygieia("sessions", "list", "--json", *args, env=_env(db_url, tmp_path))
    assert result.returncode == 0, result.stderr
    return [row["key"] for row in json.loads(result.stdout)]


async def test_sessions_list_filters_sorts_and_pages_like_the_admin_api(
    seeded: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    def keys(*args: str) -> list[str]:
        return _keys(db_url, tmp_path, *args)

    run = asyncio.to_thread
    assert await run(keys) == ["discord:dm:7", "telegram:group:-100", "discord:channel:900", "telegram:dm:42"]
    assert await run(keys, "--platform", "discord") == ["discord:dm:7", "discord:channel:900"]
    assert await run(keys, "--chat", "-100") == ["telegram:group:-100"]
    # The user's own DM and the group they wrote in.
    assert await run(keys, "--user", "42") == ["telegram:group:-100", "telegram:dm:42"]
    assert await run(keys, "--key", "DM:") == ["discord:dm:7", "telegram:dm:42"]
    assert await run(keys, "--since", "2026-11-15") == ["discord:dm:7", "telegram:group:-100"]
    assert await run(keys, "--sort", "activity", "--order", "asc", "--limit", "2", "--offset", "1") == [
        "discord:channel:900",
        "telegram:group:-100",
    ]
    assert await run(keys, "--key", "%") == []  # a substring, never a pattern


async def test_sessions_list_table_says_how_many_match_in_all(
    seeded: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    result = await asyncio.to_thread(
        hygieia, "sessions", "list", "--platform", "telegram", "--limit", "1", env=_env(db_url, tmp_path)
    )
    assert result.returncode == 0, result.stderr
    assert "1 of 2 session(s)" in result.stdout


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["--sort", "bogus"], "--sort"),
        (["--order", "up"], "--order"),
        (["--since", "0001-01-01T00:00:00+05:00"], "--since"),
    ],
)
async def test_sessions_list_bad_parameters_are_one_clear_line(
    seeded: dict[str, str], db_url: str, tmp_path: Path, args: list[str], hint: str
) -> None:
    result = await asyncio.to_thread(hygieia, "sessions", "list", *args, env=_env(db_url, tmp_path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and hint in result.stderr
