"""An API conversation is a chat like any other: in SQL across restarts, compacted as it grows
(hygiene and in-loop), and found by the admin's search."""

from __future__ import annotations

from pathlib import Path

from tests.gateway.admin_support import admin_client
from tests.gateway.conftest import user_texts
from tests.gateway.platforms.http_api.api_support import api_and_model

WINDOW = 8000
FILLER = "the quick brown fox jumps over the lazy dog while the band plays on " * 6


async def test_a_conversation_survives_a_restart(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, _responder):
        await api.client().chat.completions.create(
            model="hygieia", messages=[{"role": "user", "content": "the password is marmalade"}]
        )
    async with api_and_model(tmp_path, db_url) as (api, _fake, responder):
        await api.client().chat.completions.create(
            model="hygieia", messages=[{"role": "user", "content": "what was the password?"}]
        )
        assert any("marmalade" in t for t in user_texts(responder.chat_bodies[-1]))


async def test_a_growing_conversation_is_compacted_in_the_loop(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url, context_window=WINDOW) as (api, _fake, responder):
        client = api.client()
        for i in range(24):
            await client.chat.completions.create(
                model="hygieia", messages=[{"role": "user", "content": f"{i} {FILLER}"}]
            )
        session = await api.service.store.current_session("api:alice:default")
        assert session is not None
        triggers = {c.trigger for c in await api.service.store.list_compactions(session.id)}
        assert "in_loop" in triggers
        assert responder.summary_bodies
        _active, archived = await api.service.store.message_counts(session.id)
        assert archived > 0


async def test_a_growing_conversation_is_compacted_by_hygiene_before_the_turn(
    tmp_path: Path, db_url: str
) -> None:
    # Hygiene fires below the in-loop threshold here, so that it is the one that catches the growth.
    tuned = {
        "compression": {"hygiene_threshold": 0.5, "threshold": 0.9},
        "llm": {"max_retries": 0, "max_output_tokens": 512},
    }
    async with api_and_model(tmp_path, db_url, context_window=WINDOW, **tuned) as (api, _fake, _responder):
        client = api.client()
        triggers: list[str] = []
        for i in range(20):
            await client.chat.completions.create(
                model="hygieia", messages=[{"role": "user", "content": f"{i} {FILLER * 4}"}]
            )
            session = await api.service.store.current_session("api:alice:default")
            assert session is not None
            triggers = [c.trigger for c in await api.service.store.list_compactions(session.id)]
            if triggers:
                break
        assert triggers and triggers[0] == "hygiene"


async def test_an_api_conversation_is_found_by_the_admin_search(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, _responder):
        await api.client().chat.completions.create(
            model="hygieia",
            messages=[{"role": "user", "content": "the rhododendron needs acid soil"}],
            extra_headers={"X-Hygieia-Conversation": "garden"},
        )
        async with admin_client(api.service.store) as admin:
            found = (await admin.get("/api/search", params={"q": "rhododendron"})).json()
        assert "api:alice:garden" in str(found)
