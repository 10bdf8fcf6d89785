"""``GET /v1/models`` lists ``hygieia``; any other model is OpenAI's 404 ``model_not_found``."""

from __future__ import annotations

from pathlib import Path

import pytest
from openai import NotFoundError

from tests.gateway.platforms.http_api.api_support import api_and_model


async def test_models_lists_hygieia(tmp_path: Path, db_url: str) -> None:
    async with api_and_model(tmp_path, db_url) as (api, _fake, _responder):
        assert [m.id for m in (await api.client().models.list()).data] == ["hygieia"]


async def test_an_unlisted_model_is_model_not_found_and_nothing_is_stored(
    tmp_path: Path, db_url: str
) -> None:
    async with api_and_model(tmp_path, db_url) as (api, fake, _responder):
        with pytest.raises(NotFoundError) as raised:
            await api.client().chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hello"}]
            )
        assert raised.value.code == "model_not_found"
        body = raised.value.body
        assert isinstance(body, dict)
        assert set(body) == {"message", "type", "param", "code"}
        assert (body["type"], body["param"], body["code"]) == (
            "invalid_request_error",
            "model",
            "model_not_found",
        )
        assert fake.requests == []
        assert await api.service.store.current_session("api:alice:default") is None
