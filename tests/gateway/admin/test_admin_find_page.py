"""Finding things on the admin pages: the sessions list, search with filters, a hit in its context."""

from __future__ import annotations

import re

from agent.types import ChatMessage
from gateway.store.repository import Store
from tests.gateway.admin.test_admin_find_api import three_sessions
from tests.gateway.admin_support import admin_client, seed
from tests.store.helpers import append_turns, new_session


async def test_the_sessions_page_filters_sorts_and_pages(store: Store) -> None:
    await three_sessions(store)
    async with admin_client(store) as client:
        html = (await client.get("/", params={"sort": "cost", "limit": 2})).text
        filtered = (await client.get("/", params={"platform": "discord", "since": ""})).text
    rows = re.findall(r'<td><a href="/sessions/\w+">([^<]+)</a>', html)
    assert rows == ["discord:group:7", "telegram:dm:100"]
    assert "1–2 of 3" in html and "later →" in html and "offset=2" in html and "sort=cost" in html
    assert '<option value="cost" selected>' in html and 'name="key"' in html and 'name="user"' in html
    assert "$3.00" in html
    assert re.findall(r'<td><a href="/sessions/\w+">([^<]+)</a>', filtered) == ["discord:group:7"]


async def test_a_bad_filter_on_a_page_is_a_400_page_that_says_why(store: Store) -> None:
    async with admin_client(store) as client:
        response = await client.get("/", params={"since": "someday"})
    assert response.status_code == 400 and response.headers["content-type"].startswith("text/html")
    assert "since: not a date or time" in response.text


async def test_search_hits_show_the_session_key_and_platform_and_keep_the_filters_when_paging(
    store: Store,
) -> None:
    sid = await new_session(store, "discord:group:9", platform="discord", chat_id="9")
    for i in range(3):
        await store.append_message(sid, ChatMessage.user(f"otter number {i}", author_id="u1"))
    async with admin_client(store) as client:
        first = (await client.get("/search", params={"q": "otter", "limit": 2, "platform": "discord"})).text
        second = (
            await client.get("/search", params={"q": "otter", "limit": 2, "offset": 2, "platform": "discord"})
        ).text
        none = (await client.get("/search", params={"q": "otter", "platform": "telegram"})).text
    assert first.count('class="hit"') == 2 and second.count('class="hit"') == 1
    assert '<span class="key">discord:group:9</span> <span class="badge">discord</span>' in first
    assert "later →" in first and "platform=discord" in first and "later →" not in second
    assert "No matches." in none
    for name in ("state", "sort", "platform", "chat", "session", "user", "since", "until"):
        assert f'name="{name}"' in first


async def test_a_hit_in_the_archive_opens_its_block_and_marks_the_message(store: Store) -> None:
    await seed(store)
    async with admin_client(store) as client:
        [hit] = (await client.get("/api/search", params={"q": '"message 3"', "state": "archived"})).json()
        search = (await client.get("/search", params={"q": '"message 3"'})).text
        href = re.search(r'<li class="hit"><a href="([^"]+)"', search)
        assert href is not None
        page = (await client.get(href.group(1).replace("&amp;", "&"))).text
    assert href.group(1).endswith(f"#m{hit['message_id']}")
    opened = re.findall(r'<details class="archived"( open)?>', page)
    assert opened.count(" open") == 1
    block = page[page.index('<details class="archived" open>') :]
    block = block[: block.index("</details>")]
    assert f'class="msg assistant inactive target" id="m{hit["message_id"]}"' in block


async def test_a_hit_on_a_long_transcript_lands_on_the_page_that_holds_it(store: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("the needle is here"))
    await append_turns(store, sid, 230)
    async with admin_client(store) as client:
        [hit] = (await client.get("/api/search", params={"q": "needle"})).json()
        page = (await client.get(f"/sessions/{sid}", params={"message": hit["message_id"]})).text
    assert f'class="msg user target" id="m{hit["message_id"]}"' in page and "messages 1–200" in page
