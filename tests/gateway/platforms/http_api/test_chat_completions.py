"""Chat completions with the official ``openai`` client: the server keeps the conversation."""

from __future__ import annotations

from pathlib import Path

from tests.gateway.conftest import user_texts
from tests.gateway.platforms.http_api.api_support import api_and_model


async def test_a_conversation_keeps_its_history_server_side(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, responder):
        client = api.client()
        first = await client.chat.completions.create(
            model="hygieia", messages=[{"role": "user", "content": "my name is Ada"}]
        )
        second = await client.chat.completions.create(
            model="hygieia", messages=[{"role": "user", "content": "what is my name?"}]
        )
        assert first.choices[0].message.content == "reply: my name is Ada"
        assert second.choices[0].message.content == "reply: what is my name?"
        assert second.choices[0].finish_reason == "stop"
        seen = " ".join(user_texts(responder.chat_bodies[-1]))
        assert "my name is Ada" in seen and "what is my name?" in seen
        assert await api.service.store.current_session("api:alice:default") is not None
