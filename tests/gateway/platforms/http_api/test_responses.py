"""``/v1/responses``: a named conversation, ``previous_response_id``, streaming."""

from __future__ import annotations

from pathlib import Path

from tests.gateway.conftest import user_texts
from tests.gateway.platforms.http_api.api_support import api_and_model


async def test_a_named_conversation_keeps_its_history(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, responder):
        client = api.client()
        first = await client.responses.create(
            model="hygieia", input="the code word is heron", conversation="notes"
        )
        second = await client.responses.create(
            model="hygieia", input="what is the code word?", conversation="notes"
        )
        assert first.output_text == "reply: the code word is heron"
        assert second.output_text == "reply: what is the code word?"
        assert first.id.startswith("resp_") and first.id != second.id
        assert any("heron" in t for t in user_texts(responder.chat_bodies[-1]))
        assert await api.service.store.current_session("api:alice:notes") is not None


async def test_previous_response_id_continues_its_conversation(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, responder):
        client = api.client()
        first = await client.responses.create(model="hygieia", input="remember kestrel", conversation="birds")
        await client.responses.create(model="hygieia", input="and now?", previous_response_id=first.id)
        assert any("kestrel" in t for t in user_texts(responder.chat_bodies[-1]))
        default = await api.service.store.current_session("api:alice:default")
        assert default is None


async def test_a_response_id_survives_a_restart(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, _responder):
        first = await api.client().responses.create(model="hygieia", input="remember wren", conversation="c")
    async with api_and_model(tmp_path, db_url) as (api, _fake, responder):
        await api.client().responses.create(model="hygieia", input="go on", previous_response_id=first.id)
        assert any("wren" in t for t in user_texts(responder.chat_bodies[-1]))


async def test_responses_stream_text_deltas_then_completed(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, _responder):
        stream = await api.client().responses.create(
            model="hygieia", input="stream this", conversation="s", stream=True
        )
        kinds: list[str] = []
        text = ""
        async for event in stream:
            kinds.append(event.type)
            if event.type == "response.output_text.delta":
                text += event.delta
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        assert text == "reply: stream this"
