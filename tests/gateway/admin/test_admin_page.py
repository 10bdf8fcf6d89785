"""The admin page: login by ?token= once, sessions, a session (chart, transcript), search."""

from __future__ import annotations

import re

from agent.types import ChatMessage, StrategyRun
from gateway.store.repository import Store
from tests.gateway.admin_support import TOKEN, XSS, admin_client, seed
from tests.store.engines import only
from tests.store.helpers import append_turns, new_session


async def test_token_in_the_url_sets_an_httponly_strict_cookie_and_redirects_to_the_clean_url(
    store: Store,
) -> None:
    async with admin_client(store, authed=False) as client:
        login = await client.get("/search", params={"q": "x", "token": TOKEN})
        assert login.status_code == 303
        assert login.headers["location"] == "/search?q=x"
        cookie = login.headers["set-cookie"]
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        assert TOKEN not in cookie
        page = await client.get("/")  # the client keeps the cookie, as a browser would
    assert page.status_code == 200 and "Sessions" in page.text


async def test_a_wrong_token_in_the_url_is_401_and_sets_no_cookie(store: Store) -> None:
    async with admin_client(store, authed=False) as client:
        response = await client.get("/", params={"token": "guess"})
        assert response.status_code == 401 and "set-cookie" not in response.headers
        assert (await client.get("/")).status_code == 401


async def test_the_login_redirect_never_leaves_the_site(store: Store) -> None:
    async with admin_client(store, authed=False) as client:
        response = await client.get(f"http://admin.test//evil.example/?token={TOKEN}")
    assert response.headers["location"] == "/evil.example/"


async def test_a_forged_cookie_is_401(store: Store) -> None:
    async with admin_client(store, authed=False) as client:
        client.cookies.set("hygieia_admin", TOKEN, domain="admin.test")
        assert (await client.get("/")).status_code == 401


async def test_the_sessions_table_links_each_session_and_has_a_search_box(store: Store) -> None:
    seeded = await seed(store)
    async with admin_client(store) as client:
        response = await client.get("/")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert f'href="/sessions/{seeded.session_id}"' in response.text
    assert 'action="/search"' in response.text and 'name="q"' in response.text
    assert "script-src" not in response.headers["content-security-policy"]  # so no script may run


async def test_user_text_is_escaped_everywhere_on_the_pages(store: Store) -> None:
    sid = await new_session(store, f"telegram:{XSS}", chat_id="1")
    await store.append_message(sid, ChatMessage.user(f"hello {XSS}", author_name=f"Eve {XSS}"))
    async with admin_client(store) as client:
        pages = [
            (await client.get("/")).text,
            (await client.get(f"/sessions/{sid}")).text,
            (await client.get("/search", params={"q": f"hello {XSS}"})).text,
        ]
    for html in pages:
        assert "<script>" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


async def test_the_chart_has_one_drop_per_compaction_labelled_with_its_trigger(store: Store) -> None:
    seeded = await seed(store)
    async with admin_client(store) as client:
        html = (await client.get(f"/sessions/{seeded.session_id}")).text
    svg = html[html.index("<svg") : html.index("</svg>")]
    assert svg.count('class="drop"') == 2
    assert re.findall(r'<text class="trigger"[^>]*>([^<]*)</text>', svg) == ["hygiene", "manual"]
    assert svg.count('<circle class="call"') == 6


async def test_the_session_page_shows_the_last_strategy_and_what_each_freed(store: Store) -> None:
    seeded = await seed(store)
    async with admin_client(store) as client:
        html = (await client.get(f"/sessions/{seeded.session_id}")).text
    freed = sum(c.tokens_before - c.tokens_after for c in seeded.compactions)
    last = seeded.compactions[-1]
    assert f"Last strategy: <b>summary</b> (freed {last.tokens_before - last.tokens_after:,} tokens)" in html
    assert f"Freed by strategy: summary {freed:,} tokens (2×)" in html
    assert "<th>strategy</th>" in html and '<th class="n">freed</th>' in html


async def test_the_session_page_counts_the_apis_clearing_with_the_compactions(store: Store) -> None:
    seeded = await seed(store)
    await store.record_strategy_run(seeded.session_id, StrategyRun("server_clearing", 7000))
    async with admin_client(store) as client:
        html = (await client.get(f"/sessions/{seeded.session_id}")).text
    freed = sum(c.tokens_before - c.tokens_after for c in seeded.compactions)
    assert "Last strategy: <b>server_clearing</b> (freed 7,000 tokens)" in html
    assert f"Freed by strategy: summary {freed:,} tokens (2×), server_clearing 7,000 tokens (1×)" in html


async def test_an_undone_compaction_stays_on_the_chart_marked_as_undone(store: Store) -> None:
    seeded = await seed(store)
    await store.restore_latest_compaction(seeded.session_id)
    async with admin_client(store) as client:
        html = (await client.get(f"/sessions/{seeded.session_id}")).text
    assert html.count('class="drop"') == 2
    assert 'class="compaction restored" data-trigger="manual"' in html and "manual (undone)" in html


async def test_archived_turns_are_folded_in_details_and_summaries_marked(store: Store) -> None:
    seeded = await seed(store)
    async with admin_client(store) as client:
        html = (await client.get(f"/sessions/{seeded.session_id}")).text
    transcript = html[html.index('<div class="transcript">') :]
    folded = re.findall(r'<details class="archived">(.*?)</details>', transcript, re.S)
    # In transcript order the active second summary sits where the first summary was, between the
    # rows the first compaction archived: two folded runs around it, every archived row inside one.
    assert len(folded) == 2
    inside = "".join(folded)
    for text in ("message 0", "first summary", "message 3", "message 5"):
        assert text in inside
        assert text not in re.sub(r"<details.*?</details>", "", transcript, flags=re.S)
    assert all("archived message(s) · hygiene, manual" in f for f in folded)
    assert re.search(r'class="msg user summary"[^>]*>.*?second summary', transcript, re.S)
    assert '<span class="badge summary">summary</span>' in transcript


async def test_search_results_mark_hits_and_escape_the_rest(store: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("the <b>zebra</b> & the lion"))
    async with admin_client(store) as client:
        html = (await client.get("/search", params={"q": "zebra"})).text
    assert "<mark>zebra</mark>" in html
    assert "<b>zebra" not in html and "&amp; the lion" in html
    assert f'href="/sessions/{sid}?message=' in html


async def test_the_restore_button_undoes_the_latest_compaction_and_returns_to_the_session(
    store: Store,
) -> None:
    seeded = await seed(store)
    async with admin_client(store) as client:
        page = (await client.get(f"/sessions/{seeded.session_id}")).text
        assert f'href="/sessions/{seeded.session_id}/restore"' in page
        confirm = (await client.get(f"/sessions/{seeded.session_id}/restore")).text
        assert f'action="/sessions/{seeded.session_id}/restore"' in confirm and "manual compaction" in confirm
        response = await client.post(f"/sessions/{seeded.session_id}/restore", data={"confirm": "yes"})
    assert response.status_code == 303
    assert response.headers["location"].startswith(f"/sessions/{seeded.session_id}?done=")
    [_, latest] = await store.list_compactions(seeded.session_id)
    assert latest.restored_at is not None


async def test_an_unknown_session_page_is_404(store: Store) -> None:
    async with admin_client(store) as client:
        assert (await client.get(f"/sessions/{'a' * 32}")).status_code == 404


@only("sqlite")
async def test_a_long_transcript_opens_on_its_latest_page_and_a_search_link_on_the_hit(store: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("the needle is here"))
    await append_turns(store, sid, 230)
    async with admin_client(store) as client:
        latest = (await client.get(f"/sessions/{sid}")).text
        [hit] = (await client.get("/api/search", params={"q": "needle"})).json()
        linked = (await client.get(f"/sessions/{sid}", params={"message": hit["message_id"]})).text
    assert "message 229" in latest and "needle" not in latest
    assert "← earlier" in latest
    assert f'id="m{hit["message_id"]}"' in linked and "later →" in linked
