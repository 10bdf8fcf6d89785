"""``sort=relevance|recent`` reaches the store from the admin API, the admin page and the CLI."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from agent.types import ChatMessage
from gateway.store.db import Database
from gateway.store.migrate import upgrade_to_head
from gateway.store.repository import Store
from tests.gateway.admin_support import admin_client
from tests.process_env import clean_env
from tests.store.helpers import new_session


async def _two(store: Store) -> tuple[int, int]:
    sid = await new_session(store)
    best = await store.append_message(sid, ChatMessage.user("quince quince quince quince"))
    newest = await store.append_message(sid, ChatMessage.user("quince " + "filler " * 40))
    assert best.id is not None and newest.id is not None
    return best.id, newest.id


async def test_the_api_orders_by_relevance_or_recency(store: Store) -> None:
    best, newest = await _two(store)
    async with admin_client(store) as client:
        default = (await client.get("/api/search", params={"q": "quince"})).json()
        recent = (await client.get("/api/search", params={"q": "quince", "sort": "recent"})).json()
        bad = await client.get("/api/search", params={"q": "quince", "sort": "sideways"})
    assert [h["message_id"] for h in default] == [best, newest]
    assert [h["message_id"] for h in recent] == [newest, best]
    assert bad.status_code == 400 and "sort" in bad.text


async def test_the_page_form_offers_the_order_and_keeps_the_choice(store: Store) -> None:
    best, newest = await _two(store)
    async with admin_client(store) as client:
        page = (await client.get("/search", params={"q": "quince", "sort": "recent"})).text
    assert '<option value="recent" selected>' in page
    assert page.index(f"#{newest}<") < page.index(f"#{best}<")


def test_the_cli_takes_sort(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'h.db'}"

    async def seed() -> tuple[int, int]:
        await upgrade_to_head(url)
        async with Database(url) as db:
            return await _two(Store(db))

    best, newest = asyncio.run(seed())
    env = {**clean_env(), "HYGIEIA_DATABASE_URL": url, "HYGIEIA_DATA_DIR": str(tmp_path)}

    def search(*extra: str) -> subprocess.CompletedProcess[str]:
        args = [sys.executable, "-m", "gateway.cli", "sessions", "search", "quince", *extra]
        return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)

    recent = json.loads(search("--sort", "recent", "--json").stdout)
    assert [h["message_id"] for h in recent] == [newest, best]
    wrong = search("--sort", "sideways")
    assert wrong.returncode == 2 and "relevance or recent" in wrong.stderr
