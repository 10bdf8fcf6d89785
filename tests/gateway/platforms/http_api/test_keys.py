"""API keys: wrong, short and revoked keys; the throttle; a key sees only its own conversations."""

from __future__ import annotations

from pathlib import Path

import pytest
from openai import AuthenticationError, NotFoundError, RateLimitError

from agent.errors import ConfigError
from gateway.config import Settings
from gateway.platforms.http_api.keys import ApiKeys
from gateway.runner import build_adapters
from gateway.throttle import MAX_FAILURES
from tests.fakes.anthropic import FakeAnthropic
from tests.gateway.conftest import ChatResponder, user_texts
from tests.gateway.platforms.http_api.api_support import (
    ALICE_KEY,
    BOB_KEY,
    api_and_model,
    api_settings,
    serving_api,
)


async def test_a_wrong_key_is_invalid_api_key(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, _responder):
        with pytest.raises(AuthenticationError) as raised:
            await api.client("not-a-key-of-this-server-at-all").models.list()
        assert raised.value.status_code == 401
        assert raised.value.code == "invalid_api_key"


async def test_a_missing_key_is_invalid_api_key(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, _responder), api.http(None) as http:
        answer = await http.post("/chat/completions", json={"model": "hygieia", "messages": []})
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == "invalid_api_key"


async def test_wrong_keys_are_throttled_but_the_right_key_still_works(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, _responder):
        wrong = api.client("x" * 30)
        for _ in range(MAX_FAILURES):
            with pytest.raises(AuthenticationError):
                await wrong.models.list()
        with pytest.raises(RateLimitError) as raised:
            await wrong.models.list()
        assert raised.value.status_code == 429
        assert raised.value.response.headers["retry-after"]
        assert [m.id for m in (await api.client().models.list()).data] == ["hygieia"]


def test_a_short_key_is_refused_at_startup(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, api_keys="ci=too-short-key")
    with pytest.raises(ConfigError, match="too short"):
        build_adapters(settings, ["api"])


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "no-equals-sign-here-0123456789",
        "bad name=0123456789abcdefghijklmn",
        "a=0123456789abcdefghijklmn,a=zyxwvutsrqponmlkjihgfedcba",
    ],
)
def test_malformed_keys_are_a_config_error_that_shows_no_key(raw: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ApiKeys.parse(raw)
    assert "0123456789abcdefghijklmn" not in str(raised.value)


def test_keys_are_kept_only_as_digests() -> None:
    keys = ApiKeys.parse(f"alice={ALICE_KEY}")
    assert ALICE_KEY not in repr(keys)
    assert keys.identify(ALICE_KEY) == "alice"
    assert keys.identify(ALICE_KEY[:-1]) is None


async def test_a_revoked_key_is_refused_after_a_restart(tmp_path: Path, db_url: str) -> None:
    async with FakeAnthropic(responder=ChatResponder()) as fake:
        async with serving_api(api_settings(tmp_path, db_url, fake)) as api:
            await api.client(BOB_KEY).chat.completions.create(
                model="hygieia", messages=[{"role": "user", "content": "hi"}]
            )
        revoked = api_settings(tmp_path, db_url, fake, api_keys=f"alice={ALICE_KEY}")
        async with serving_api(revoked) as api:
            with pytest.raises(AuthenticationError):
                await api.client(BOB_KEY).models.list()


async def test_one_key_cannot_read_another_keys_conversation(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, responder):
        await api.client(ALICE_KEY).chat.completions.create(
            model="hygieia",
            messages=[{"role": "user", "content": "alice's private plan"}],
            extra_headers={"X-Hygieia-Conversation": "shared-name"},
        )
        await api.client(BOB_KEY).chat.completions.create(
            model="hygieia",
            messages=[{"role": "user", "content": "what was the plan?"}],
            extra_headers={"X-Hygieia-Conversation": "shared-name"},
        )
        assert not any("private plan" in t for t in user_texts(responder.chat_bodies[-1]))
        assert await api.service.store.current_session("api:bob:shared-name") is not None


async def test_another_keys_response_id_is_not_found(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, _responder):
        mine = await api.client(ALICE_KEY).responses.create(model="hygieia", input="hello", conversation="c1")
        with pytest.raises(NotFoundError) as raised:
            await api.client(BOB_KEY).responses.create(
                model="hygieia", input="continue", previous_response_id=mine.id
            )
        assert raised.value.code == "previous_response_not_found"
