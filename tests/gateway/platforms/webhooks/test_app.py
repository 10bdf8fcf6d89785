"""The /hooks app on its own: every refusal is JSON with its status and stores nothing; what is
accepted reaches the gateway's intake (a recording handler here) before the 202."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from gateway.config.webhooks import WebhookRoute
from gateway.platforms.base import InboundMessage
from gateway.platforms.webhooks.app import WebhookApp
from tests.gateway.inbox_recorder import Inbox
from tests.gateway.webhooks_support import (
    PUSH,
    SECRET,
    generic_headers,
    github_headers,
    now,
    post_github,
    route,
)

URL = "http://hooks.test/gh"


def app_with(inbox: Inbox | None, **overrides: Any) -> WebhookApp:
    hooks = WebhookApp(
        {"gh": WebhookRoute(**route("telegram:-100200", **overrides))}, {"gh": SECRET.encode()}
    )
    hooks.handler = inbox
    return hooks


@pytest.fixture
def inbox() -> Inbox:
    return Inbox()


async def client_for(hooks: WebhookApp) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=hooks.asgi)) as client:
        yield client


@pytest.fixture
async def client(inbox: Inbox) -> AsyncIterator[httpx.AsyncClient]:
    async for c in client_for(app_with(inbox)):
        yield c


async def test_a_signed_github_push_is_handed_to_the_gateway_then_answered_202(
    client: httpx.AsyncClient, inbox: Inbox
) -> None:
    response = await post_github(client, URL, PUSH, delivery="abc-1")
    assert response.status_code == 202
    assert response.json() == {"status": "accepted", "delivery": "abc-1"}
    [message] = inbox.messages
    assert (message.platform, message.chat_id, message.chat_type) == ("telegram", "-100200", "group")
    assert message.platform_message_id == "webhook:gh:abc-1"
    assert message.text == "mona pushed to octo/hello: Fix the flux capacitor"
    assert message.webhook is not None and message.webhook.route == "gh"


async def test_a_wrong_github_signature_gets_401_and_nothing_is_handed_on(
    client: httpx.AsyncClient, inbox: Inbox
) -> None:
    body = json.dumps(PUSH).encode()
    response = await client.post(URL, content=body, headers=github_headers(body, secret="not-the-secret"))
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "bad_signature"
    assert inbox.messages == []


async def test_an_unsigned_post_gets_401(client: httpx.AsyncClient, inbox: Inbox) -> None:
    response = await client.post(URL, json=PUSH)
    assert response.status_code == 401
    assert "x-hub-signature-256" in response.json()["error"]["message"]
    assert inbox.messages == []


async def test_a_generic_route_accepts_its_signature_with_a_timestamp(inbox: Inbox) -> None:
    body = json.dumps(PUSH).encode()
    async for client in client_for(app_with(inbox, signature="generic")):
        headers = generic_headers(body, delivery="g-1", timestamp=now())
        response = await client.post(URL, content=body, headers=headers)
    assert response.status_code == 202
    assert inbox.messages[0].platform_message_id == "webhook:gh:g-1"


async def test_a_generic_route_refuses_a_replayed_old_timestamp(inbox: Inbox) -> None:
    body = json.dumps(PUSH).encode()
    async for client in client_for(app_with(inbox, signature="generic")):
        headers = generic_headers(body, timestamp=now() - 3600)
        response = await client.post(URL, content=body, headers=headers)
    assert response.status_code == 401
    assert inbox.messages == []


async def test_a_body_over_the_cap_gets_413(inbox: Inbox) -> None:
    body = json.dumps({**PUSH, "pad": "x" * 2000}).encode()
    async for client in client_for(app_with(inbox, max_body_bytes=1000)):
        response = await client.post(URL, content=body, headers=github_headers(body))
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "too_large"
    assert inbox.messages == []


async def test_a_streamed_body_without_length_over_the_cap_gets_413(inbox: Inbox) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"x" * 500

    async for client in client_for(app_with(inbox, max_body_bytes=1000)):
        response = await client.post(URL, content=chunks(), headers=github_headers(b""))
    assert response.status_code == 413
    assert inbox.messages == []


async def test_over_the_rate_gets_429_with_retry_after(inbox: Inbox) -> None:
    async for client in client_for(app_with(inbox, rate_per_minute=2)):
        statuses = [(await post_github(client, URL, PUSH)).status_code for _ in range(3)]
        last = await post_github(client, URL, PUSH)
    assert statuses == [202, 202, 429]
    assert int(last.headers["retry-after"]) >= 1
    assert len(inbox.messages) == 2


async def test_a_body_that_is_not_json_gets_400(client: httpx.AsyncClient, inbox: Inbox) -> None:
    body = b"<xml/>"
    response = await client.post(URL, content=body, headers=github_headers(body))
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_json"
    assert inbox.messages == []


async def test_githubs_form_encoding_is_read(client: httpx.AsyncClient, inbox: Inbox) -> None:
    body = ("payload=" + quote(json.dumps(PUSH))).encode()
    headers = {**github_headers(body), "Content-Type": "application/x-www-form-urlencoded"}
    response = await client.post(URL, content=body, headers=headers)
    assert response.status_code == 202
    assert inbox.messages[0].text.startswith("mona pushed")


async def test_an_unknown_route_gets_a_json_404(client: httpx.AsyncClient) -> None:
    response = await client.post("http://hooks.test/nope", json={})
    assert response.status_code == 404
    assert "nope" in response.json()["error"]["message"]


async def test_a_get_gets_a_json_405(client: httpx.AsyncClient) -> None:
    response = await client.get(URL)
    assert response.status_code == 405
    assert "error" in response.json()


async def test_a_template_field_missing_from_the_payload_is_marked_and_still_delivered(
    client: httpx.AsyncClient, inbox: Inbox
) -> None:
    response = await post_github(client, URL, {"zen": "Design for failure."})
    assert response.status_code == 202
    assert inbox.messages[0].text == (
        "<missing pusher.name> pushed to <missing repository.full_name>: <missing commits.0.message>"
    )


async def test_the_rendered_text_is_cut_at_the_routes_cap(inbox: Inbox) -> None:
    async for client in client_for(app_with(inbox, template="{{ pad }}", max_template_chars=200)):
        assert (await post_github(client, URL, {"pad": "y" * 5000})).status_code == 202
    text = inbox.messages[0].text
    assert len(text) <= 200 and text.endswith("[cut: the first 159 of 5,000 characters]")


async def test_when_the_store_fails_the_sender_gets_503_to_retry(inbox: Inbox) -> None:
    async def down(message: InboundMessage) -> None:
        raise OSError("database is gone")

    hooks = app_with(None)
    hooks.handler = down
    async for client in client_for(hooks):
        response = await post_github(client, URL, PUSH)
    assert response.status_code == 503
    assert response.json()["error"]["type"] == "unavailable"


async def test_a_default_template_shows_the_event_and_the_payload(inbox: Inbox) -> None:
    hooks = WebhookApp(
        {"gh": WebhookRoute(secret_env="X", deliver_to="discord:123")}, {"gh": SECRET.encode()}
    )
    hooks.handler = inbox
    async for client in client_for(hooks):
        assert (await post_github(client, URL, {"a": 1})).status_code == 202
    assert inbox.messages[0].text == 'Webhook gh (push):\n{"a":1}'
    assert inbox.messages[0].chat_type == "group"


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"[" * 100_000 + b"]" * 100_000, 400),  # nesting past the parser's recursion limit
        (b'{"text": "\xff\xfe not utf-8"}', 400),
        (b"", 400),
        (b'"just a string"', 202),
        (b"[1, 2, 3]", 202),
        (b'{"pusher": {"name": "\\ud800\\u0000"}}', 202),  # a lone surrogate and NUL: cleaned at intake
        (b"NaN", 202),
    ],
    ids=["deep", "bad-utf8", "empty", "string", "list", "surrogate-nul", "nan"],
)
async def test_hostile_bodies_get_a_clear_answer_never_a_500(
    client: httpx.AsyncClient, inbox: Inbox, body: bytes, status: int
) -> None:
    response = await client.post(URL, content=body, headers=github_headers(body))
    assert response.status_code == status, response.text
    assert len(inbox.messages) == (1 if status == 202 else 0)


async def test_an_event_the_route_does_not_take_is_acknowledged_and_not_stored(inbox: Inbox) -> None:
    async for client in client_for(app_with(inbox, events=["issues"])):
        response = await post_github(client, URL, PUSH)  # X-GitHub-Event: push
    assert response.status_code == 202
    assert response.json()["status"] == "ignored"
    assert inbox.messages == []


async def test_an_event_the_route_takes_is_stored(inbox: Inbox) -> None:
    async for client in client_for(app_with(inbox, events=["push", "issues"])):
        assert (await post_github(client, URL, PUSH)).json()["status"] == "accepted"
    assert len(inbox.messages) == 1
