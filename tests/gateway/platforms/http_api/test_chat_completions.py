"""Chat completions with the official ``openai`` client: the server keeps the conversation."""

from __future__ import annotations

from pathlib import Path

import pytest
from openai import APIStatusError

from tests.fakes.anthropic import error_reply, refusal_reply, text_reply
from tests.gateway.conftest import ChatResponder, user_texts
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


async def test_a_resent_history_appends_only_what_follows_the_last_answer(
    tmp_path: Path, db_url: str
) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, responder):
        client = api.client()
        first = await client.chat.completions.create(
            model="hygieia", messages=[{"role": "user", "content": "alpha"}]
        )
        await client.chat.completions.create(
            model="hygieia",
            messages=[
                {"role": "system", "content": "you are a client-side prompt"},
                {"role": "user", "content": "alpha"},
                {"role": "assistant", "content": first.choices[0].message.content or ""},
                {"role": "user", "content": "beta"},
            ],
        )
        texts = user_texts(responder.chat_bodies[-1])
        assert sum("alpha" in t for t in texts) == 1
        assert sum("beta" in t for t in texts) == 1
        assert not any("client-side prompt" in t for t in texts)


async def test_streaming_sends_chunks_and_the_whole_answer(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, _responder):
        stream = await api.client().chat.completions.create(
            model="hygieia", messages=[{"role": "user", "content": "tell me a story"}], stream=True
        )
        pieces: list[str] = []
        reasons: list[str | None] = []
        async for chunk in stream:
            pieces.append(chunk.choices[0].delta.content or "")
            reasons.append(chunk.choices[0].finish_reason)
        assert "".join(pieces) == "reply: tell me a story"
        assert reasons[-1] == "stop"
        assert await api.service.store.current_session("api:alice:default") is not None


async def test_a_stream_ends_with_done_on_the_wire(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, _responder), api.http() as http:
        answer = await http.post(
            "/chat/completions",
            json={"model": "hygieia", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
        )
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        assert answer.text.rstrip().endswith("data: [DONE]")


@pytest.mark.parametrize(
    ("headers", "user", "key"),
    [
        ({"X-Hygieia-Conversation": "work"}, "someone", "api:alice:work"),
        ({}, "user-7", "api:alice:user-7"),
        ({}, None, "api:alice:default"),
    ],
    ids=["header", "user_field", "default"],
)
async def test_the_conversation_is_named_by_header_then_user_then_default(
    tmp_path: Path, db_url: str, headers: dict[str, str], user: str | None, key: str
) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, _responder):
        extra = {"user": user} if user else {}
        await api.client().chat.completions.create(
            model="hygieia", messages=[{"role": "user", "content": "hello"}], extra_headers=headers, **extra
        )
        assert await api.service.store.current_session(key) is not None


async def test_two_conversations_of_one_key_do_not_share_history(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, responder):
        client = api.client()
        await client.chat.completions.create(
            model="hygieia", messages=[{"role": "user", "content": "secret garden"}], user="one"
        )
        await client.chat.completions.create(
            model="hygieia", messages=[{"role": "user", "content": "hello"}], user="two"
        )
        assert not any("secret garden" in t for t in user_texts(responder.chat_bodies[-1]))


async def test_a_refusal_finishes_with_content_filter(tmp_path: Path, db_url: str) -> None:
    responder = ChatResponder()
    responder.override = lambda body: refusal_reply("", category="cyber")
    async with api_and_model(tmp_path, db_url, responder) as (api, _fake, _responder):
        answer = await api.client().chat.completions.create(
            model="hygieia", messages=[{"role": "user", "content": "something refused"}]
        )
        assert answer.choices[0].finish_reason == "content_filter"


async def test_an_overloaded_model_answers_503_and_keeps_the_message(tmp_path: Path, db_url: str) -> None:
    responder = ChatResponder()
    answers = [error_reply(529, "overloaded_error", "Overloaded")]
    responder.override = lambda body: answers.pop(0) if answers else text_reply("back again")
    async with api_and_model(tmp_path, db_url, responder) as (api, _fake, _responder):
        with pytest.raises(APIStatusError) as raised:
            await api.client().chat.completions.create(
                model="hygieia", messages=[{"role": "user", "content": "are you there?"}]
            )
        assert raised.value.status_code == 503
        assert raised.value.code == "overloaded"
        session = await api.service.store.current_session("api:alice:default")
        assert session is not None
        stored = await api.service.store.load_active(session.id)
        assert any("are you there?" in m.text for m in stored)


async def test_a_message_over_the_inbound_cap_is_context_length_exceeded(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url, sessions={"max_inbound_chars": 1000}) as (api, _fake, _r):
        with pytest.raises(APIStatusError) as raised:
            await api.client().chat.completions.create(
                model="hygieia", messages=[{"role": "user", "content": "x" * 5000}]
            )
        assert raised.value.status_code == 400
        assert raised.value.code == "context_length_exceeded"


async def test_a_refusal_mid_stream_finishes_the_stream_with_content_filter(
    tmp_path: Path, db_url: str
) -> None:
    responder = ChatResponder()
    responder.override = lambda body: refusal_reply("Here is the start of an answer that", category="cyber")
    async with api_and_model(tmp_path, db_url, responder) as (api, _fake, _responder):
        stream = await api.client().chat.completions.create(
            model="hygieia", messages=[{"role": "user", "content": "something refused"}], stream=True
        )
        reasons = [chunk.choices[0].finish_reason async for chunk in stream]
        assert reasons[-1] == "content_filter"


async def test_an_overloaded_model_before_the_first_words_of_a_stream_is_a_plain_503(
    tmp_path: Path, db_url: str
) -> None:
    responder = ChatResponder()
    responder.override = lambda body: error_reply(529, "overloaded_error", "Overloaded")
    async with api_and_model(tmp_path, db_url, responder) as (api, _fake, _responder):
        with pytest.raises(APIStatusError) as raised:
            await api.client().chat.completions.create(
                model="hygieia", messages=[{"role": "user", "content": "busy?"}], stream=True
            )
        assert raised.value.status_code == 503
