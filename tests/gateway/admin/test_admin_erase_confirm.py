"""The erase confirmation: a code only the admin page shows (derived from the admin token and the exact
platform and user), never the guessable ``platform:user``; and a platform with ``:`` is refused, so
``<platform>:<user_id>`` always reads one way."""

from __future__ import annotations

import re

import httpx

from agent.types import ChatMessage
from gateway.store.repository import Store
from tests.gateway.admin_support import admin_client
from tests.store.helpers import new_session

CODE = re.compile(r"type <code>([A-Z0-9-]+)</code> to confirm")


async def preview_code(client: httpx.AsyncClient, platform: str, user: str) -> tuple[str, str]:
    """The code the confirmation page asks to type, and the page."""
    page = (await client.get("/erase", params={"platform": platform, "user": user})).text
    found = CODE.search(page)
    assert found is not None, page
    return found.group(1), page


async def test_the_guessable_platform_user_text_does_not_confirm_an_erasure(store: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("mine", author_id="u1"))
    async with admin_client(store) as client:
        guessed = await client.post(
            "/erase", data={"platform": "telegram", "user": "u1", "typed": "telegram:u1"}
        )
    assert guessed.status_code == 400
    assert len(await store.load_active(sid)) == 1


async def test_the_code_shown_on_the_confirmation_page_erases(store: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("mine", author_id="u1"))
    async with admin_client(store) as client:
        code, _ = await preview_code(client, "telegram", "u1")
        done = await client.post("/erase", data={"platform": "telegram", "user": "u1", "typed": code})
    assert done.status_code == 303
    assert await store.load_active(sid) == []


async def test_a_code_confirms_only_the_user_it_was_shown_for(store: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("mine", author_id="u1"))
    async with admin_client(store) as client:
        other, _ = await preview_code(client, "telegram", "u2")
        mine, _ = await preview_code(client, "telegram", "u1")
        refused = await client.post("/erase", data={"platform": "telegram", "user": "u1", "typed": other})
    assert other != mine and refused.status_code == 400
    assert len(await store.load_active(sid)) == 1


async def test_the_confirmation_page_names_platform_and_user_apart_when_the_id_holds_a_colon(
    store: Store,
) -> None:
    async with admin_client(store) as client:
        _, page = await preview_code(client, "discord", "guild:42:user")
    assert "platform <b>discord</b>" in page and "user id <b>guild:42:user</b>" in page


async def test_a_platform_with_a_colon_is_refused_so_the_api_confirmation_reads_one_way(store: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("mine", author_id="b:c"))
    async with admin_client(store) as client:
        answer = await client.post(
            "/api/erase", json={"platform": "telegram:b", "user_id": "c", "confirm": "telegram:b:c"}
        )
        preview = await client.get("/api/erase", params={"platform": "telegram:b", "user": "c"})
        erased = await client.post(
            "/api/erase", json={"platform": "telegram", "user_id": "b:c", "confirm": "telegram:b:c"}
        )
    assert (
        answer.status_code == 400 and "platform" in answer.json()["error"] and ":" in answer.json()["error"]
    )
    assert preview.status_code == 400
    assert erased.status_code == 200 and erased.json()["erased"]["messages"] == 1
