"""State-changing requests signed in by the cookie must come from the admin page itself: a form posted
from another origin (another port of the same host is the same *site*, so SameSite=Strict lets the
cookie through) is 403, and the JSON API takes the cookie only with a JSON body."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from agent.types import ChatMessage
from gateway.admin.app import create_app
from gateway.store.repository import Store
from tests.gateway.admin_support import TOKEN
from tests.store.helpers import new_session

ORIGIN = "http://admin.test"
SAME_SITE = {"Origin": "http://admin.test:8080", "Sec-Fetch-Site": "same-site"}


@asynccontextmanager
async def browser(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    """A client signed in the way a browser is: the cookie from the one-time login link, no bearer."""
    transport = httpx.ASGITransport(app=create_app(store, token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
        login = await client.get(f"/?token={TOKEN}")
        assert login.status_code == 303 and "hygieia_admin" in client.cookies
        yield client


async def test_a_cross_origin_form_post_with_the_cookie_is_403_and_changes_nothing(store: Store) -> None:
    sid = await new_session(store)
    async with browser(store) as client:
        answer = await client.post(f"/sessions/{sid}/end", data={"confirm": "yes"}, headers=SAME_SITE)
    assert answer.status_code == 403
    assert not (await store.get_session(sid)).ended


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://admin.test:8080"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site", "Origin": ORIGIN},
        {},
    ],
    ids=["other-port-origin", "null-origin", "cross-site", "same-site-fetch", "neither-header"],
)
async def test_a_cookie_post_not_proven_same_origin_is_403(store: Store, headers: dict[str, str]) -> None:
    sid = await new_session(store)
    async with browser(store) as client:
        answer = await client.post(f"/sessions/{sid}/end", data={"confirm": "yes"}, headers=headers)
    assert answer.status_code == 403
    assert "origin" in answer.text.lower()


@pytest.mark.parametrize(
    "headers",
    [{"Origin": ORIGIN}, {"Sec-Fetch-Site": "same-origin", "Origin": ORIGIN}],
    ids=["origin", "fetch"],
)
async def test_the_page_s_own_form_post_goes_through(store: Store, headers: dict[str, str]) -> None:
    sid = await new_session(store)
    async with browser(store) as client:
        answer = await client.post(f"/sessions/{sid}/end", data={"confirm": "yes"}, headers=headers)
    assert answer.status_code == 303
    assert (await store.get_session(sid)).ended


async def test_the_json_api_refuses_the_cookie_with_a_form_or_text_body(store: Store) -> None:
    sid = await new_session(store)
    async with browser(store) as client:
        as_text = await client.post(
            f"/api/sessions/{sid}/end", content="{}", headers={"Origin": ORIGIN, "Content-Type": "text/plain"}
        )
        as_form = await client.post(f"/api/sessions/{sid}/end", data={"by": "x"}, headers={"Origin": ORIGIN})
        assert not (await store.get_session(sid)).ended
        as_json = await client.post(f"/api/sessions/{sid}/end", json={}, headers={"Origin": ORIGIN})
    assert (as_text.status_code, as_form.status_code) == (403, 403)
    assert "application/json" in as_text.json()["error"]
    assert as_json.status_code == 200 and (await store.get_session(sid)).ended


async def test_a_program_with_the_bearer_token_needs_no_origin(store: Store) -> None:
    sid = await new_session(store)
    transport = httpx.ASGITransport(app=create_app(store, token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
        answer = await client.post(f"/api/sessions/{sid}/end", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200


async def test_reading_with_the_cookie_needs_no_origin(store: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("hello"))
    async with browser(store) as client:
        assert (await client.get(f"/sessions/{sid}")).status_code == 200
        assert (await client.get("/api/sessions")).status_code == 200
