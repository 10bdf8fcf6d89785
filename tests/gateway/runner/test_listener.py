"""The HTTP listener shared by the API and the webhooks: mounts, reference-counted lifetime, 404s."""

from __future__ import annotations

import aiohttp
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from agent.errors import ConfigError, HygieiaError
from gateway.runner.listener import DoorListener


def _app(word: str) -> Starlette:
    async def answer(request: Request) -> PlainTextResponse:
        return PlainTextResponse(f"{word} {request.url.path}")

    return Starlette(routes=[Route("/ping", answer)])


async def _get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status, await resp.text()


async def test_each_mount_answers_under_its_prefix() -> None:
    listener = DoorListener("127.0.0.1", 0)
    listener.mount("/v1", _app("api"))
    listener.mount("/hooks", _app("hooks"))
    await listener.open()
    try:
        assert await _get(listener.port, "/v1/ping") == (200, "api /v1/ping")
        assert (await _get(listener.port, "/hooks/ping"))[1].startswith("hooks")
    finally:
        await listener.close()


async def test_an_unknown_path_gets_an_openai_shaped_404() -> None:
    listener = DoorListener("127.0.0.1", 0)
    listener.mount("/v1", _app("api"))
    await listener.open()
    try:
        status, body = await _get(listener.port, "/nowhere")
    finally:
        await listener.close()
    assert status == 404
    assert '"invalid_request_error"' in body


async def test_the_listener_stops_only_when_its_last_user_closes() -> None:
    listener = DoorListener("127.0.0.1", 0)
    listener.mount("/v1", _app("api"))
    await listener.open()
    await listener.open()
    port = listener.port
    await listener.close()
    assert (await _get(port, "/v1/ping"))[0] == 200
    await listener.close()
    with pytest.raises(aiohttp.ClientConnectorError):
        await _get(port, "/v1/ping")


def test_a_prefix_cannot_be_mounted_twice() -> None:
    listener = DoorListener("127.0.0.1", 0)
    listener.mount("/v1", _app("api"))
    with pytest.raises(HygieiaError, match="already mounted"):
        listener.mount("/v1", _app("other"))


async def test_a_taken_port_is_one_clear_error_naming_the_setting() -> None:
    first = DoorListener("127.0.0.1", 0)
    first.mount("/v1", _app("api"))
    await first.open()
    try:
        second = DoorListener("127.0.0.1", first.port)
        second.mount("/v1", _app("api"))
        with pytest.raises(ConfigError, match="HYGIEIA_API__PORT"):
            await second.open()
        await second.close()  # a failed open leaves nothing to close
    finally:
        await first.close()
