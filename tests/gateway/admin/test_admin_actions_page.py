"""The action pages: every action behind a confirmation page, then a notice and an audit row."""

from __future__ import annotations

from agent.types import ChatMessage
from gateway.store.repository import Store
from tests.gateway.admin.test_admin_actions_api import long_session
from tests.gateway.admin_support import XSS, admin_client, summarizer
from tests.store.helpers import new_session


async def test_compact_now_from_the_page_confirms_then_shows_what_it_did(store: Store) -> None:
    sid = await long_session(store)
    async with summarizer() as engine, admin_client(store, engine=engine, window=8000) as client:
        session_page = (await client.get(f"/sessions/{sid}")).text
        confirm = (await client.get(f"/sessions/{sid}/compact")).text
        unconfirmed = await client.post(f"/sessions/{sid}/compact", data={"focus": "x"})
        done = await client.post(
            f"/sessions/{sid}/compact", data={"focus": "garden", "by": "carol", "confirm": "yes"}
        )
        landing = (await client.get(done.headers["location"])).text
        audit = (await client.get("/audit")).text
    assert f'href="/sessions/{sid}/compact"' in session_page
    assert (
        f'action="/sessions/{sid}/compact"' in confirm
        and 'name="focus"' in confirm
        and 'name="by"' in confirm
    )
    assert unconfirmed.status_code == 400 and "Confirm" in unconfirmed.text
    assert done.status_code == 303 and done.headers["location"].startswith(f"/sessions/{sid}?done=")
    assert '<p class="notice" role="status">Compacted' in landing
    assert "admin_compact" in audit and "carol via page" in audit
    [record] = await store.list_compactions(sid)
    assert record.trigger == "manual" and record.focus == "garden"


async def test_ending_a_session_from_the_page(store: Store) -> None:
    sid = await new_session(store)
    async with admin_client(store) as client:
        confirm = (await client.get(f"/sessions/{sid}/end")).text
        done = await client.post(f"/sessions/{sid}/end", data={"confirm": "yes"})
        after = (await client.get(f"/sessions/{sid}")).text
    assert f'action="/sessions/{sid}/end"' in confirm
    assert done.status_code == 303 and (await store.get_session(sid)).ended
    assert f'href="/sessions/{sid}/end"' not in after and "ended" in after


async def test_erasing_a_user_from_the_page_previews_asks_to_type_its_code_and_lands_on_the_audit(
    store: Store,
) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user(f"erase me {XSS}", author_id=XSS))
    await store.append_message(sid, ChatMessage.user("keep me", author_id="u2"))
    async with admin_client(store) as client:
        blank = (await client.get("/erase")).text
        preview = (await client.get("/erase", params={"platform": "telegram", "user": XSS})).text
        wrong = await client.post(
            "/erase", data={"platform": "telegram", "user": XSS, "typed": "telegram:u2"}
        )
        assert wrong.status_code == 400 and len(await store.load_active(sid)) == 2
        code = preview.split("type <code>", 1)[1].split("</code>", 1)[0]
        done = await client.post(
            "/erase", data={"platform": "telegram", "user": XSS, "typed": code, "by": "dpo"}
        )
        audit = (await client.get(done.headers["location"])).text
    assert 'action="/erase"' in blank and 'name="user"' in blank
    assert "deletes <b>1</b> messages" in preview and "<script>" not in preview
    assert done.status_code == 303 and done.headers["location"].startswith("/audit?done=")
    assert '<p class="notice" role="status">Erased 1 messages' in audit
    assert [m.text for m in await store.load_active(sid)] == ["keep me"]
    assert (
        "admin_erase" in audit
        and "dpo via page" in audit
        and "messages 1" in audit
        and "<script>" not in audit
    )


async def test_the_notice_comes_from_the_audit_trail_never_from_text_in_the_url(store: Store) -> None:
    sid = await new_session(store)
    other = await new_session(store, "telegram:2", chat_id="2")
    entry = await store.record_action("admin_end", actor="x", session_id=other, detail="ended the other one")
    async with admin_client(store) as client:
        injected = await client.get(f"/sessions/{sid}", params={"done": "Your token expired, log in at evil"})
        foreign = (await client.get(f"/sessions/{sid}", params={"done": entry.id})).text
    assert injected.status_code == 400
    assert "ended the other one" not in foreign and 'class="notice"' not in foreign
