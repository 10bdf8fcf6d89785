"""Acting on sessions and users through the admin API: compact, undo, end, erase; each audited."""

from __future__ import annotations

import pytest

from agent.types import ChatMessage
from gateway.store.repository import Store
from tests.gateway.admin_support import admin_client, seed, summarizer
from tests.store.helpers import new_session


async def long_session(store: Store, turns: int = 60) -> str:
    sid = await new_session(store, "telegram:dm:77", chat_id="77")
    for i in range(turns):
        text = f"turn {i}: " + "a sentence of ordinary chat about the garden and the budget. " * 5
        make = ChatMessage.user if i % 2 == 0 else ChatMessage.assistant
        await store.append_message(sid, make(text))
    return sid


async def audit_entries(client: object) -> list[dict[str, object]]:
    response = await client.get("/api/audit")  # type: ignore[attr-defined]
    assert response.status_code == 200
    return list(response.json()["entries"])


async def test_compact_now_archives_through_the_compressor_and_is_audited(store: Store) -> None:
    sid = await long_session(store)
    async with summarizer() as engine, admin_client(store, engine=engine, window=8000) as client:
        response = await client.post(
            f"/api/sessions/{sid}/compact", json={"focus": "the budget", "by": "alice"}
        )
        assert response.status_code == 200, response.text
        [entry] = await audit_entries(client)
    body = response.json()
    record = body["compaction"]
    assert (
        record["trigger"] == "manual" and record["focus"] == "the budget" and record["messages_archived"] > 0
    )
    assert body["message"].startswith(f"Compacted {record['messages_archived']} messages")
    assert any(m.kind == "summary" for m in await store.load_active(sid))
    assert entry["event"] == "admin_compact" and entry["session_id"] == sid
    assert str(entry["actor"]).startswith("alice via api from ")
    assert entry["counts"] == {
        "archived": record["messages_archived"],
        "tokens_before": record["tokens_before"],
        "tokens_after": record["tokens_after"],
    }


async def test_compact_without_a_model_is_503_and_changes_nothing(store: Store) -> None:
    sid = await long_session(store, 10)
    async with admin_client(store) as client:
        response = await client.post(f"/api/sessions/{sid}/compact")
        assert response.status_code == 503 and "no model" in response.json()["error"]
        assert await audit_entries(client) == []
    assert await store.list_compactions(sid) == []


async def test_compact_waits_while_a_turn_is_running(store: Store) -> None:
    sid = await long_session(store)
    await store.inbox_put(
        platform="telegram",
        chat_id="77",
        platform_message_id="1",
        session_key="telegram:dm:77",
        payload={"text": "hi", "user_id": "77"},
        addressed=True,
    )
    await store.inbox_claim(worker="w1", lease_seconds=60, session_key="telegram:dm:77")
    async with summarizer() as engine, admin_client(store, engine=engine, window=8000) as client:
        response = await client.post(f"/api/sessions/{sid}/compact")
    assert response.status_code == 409 and "a turn is running" in response.json()["error"]
    assert await store.list_compactions(sid) == []


async def test_restore_and_end_are_audited_with_who_asked(store: Store) -> None:
    seeded = await seed(store)
    async with admin_client(store) as client:
        restored = await client.post(f"/api/sessions/{seeded.session_id}/restore", json={"by": "bob"})
        ended = await client.post(f"/api/sessions/{seeded.session_id}/end")
        again = await client.post(f"/api/sessions/{seeded.session_id}/end")
        entries = await audit_entries(client)
    assert restored.status_code == 200 and restored.json()["id"] == seeded.compactions[1].id
    assert ended.status_code == 200 and (await store.get_session(seeded.session_id)).end_reason == "admin"
    assert again.status_code == 409 and "already ended" in again.json()["error"]
    assert [e["event"] for e in entries] == ["admin_end", "admin_restore"]
    assert str(entries[1]["actor"]).startswith("bob via api") and entries[1]["counts"] == {"restored": 3}
    assert str(entries[0]["actor"]).startswith("admin via api")


async def test_erase_needs_the_user_repeated_then_erases_and_audits_the_counts(store: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("mine", author_id="u1"))
    await store.append_message(sid, ChatMessage.user("theirs", author_id="u2"))
    async with admin_client(store) as client:
        preview = await client.get("/api/erase", params={"platform": "telegram", "user": "u1"})
        refused = await client.post(
            "/api/erase", json={"platform": "telegram", "user_id": "u1", "confirm": "telegram:u2"}
        )
        erased = await client.post(
            "/api/erase",
            json={"platform": "telegram", "user_id": "u1", "confirm": "telegram:u1", "by": "dpo"},
        )
        [entry] = await audit_entries(client)
    assert preview.json()["would_erase"]["messages"] == 1
    assert refused.status_code == 400 and "telegram:u1" in refused.json()["error"]
    assert erased.status_code == 200 and erased.json()["erased"]["messages"] == 1
    assert [m.text for m in await store.load_active(sid)] == ["theirs"]
    assert (entry["event"], entry["platform"], entry["user_id"]) == ("admin_erase", "telegram", "u1")
    assert entry["counts"]["messages"] == 1 and "exception to never deleting" in str(entry["detail"])
    assert str(entry["actor"]).startswith("dpo via api")


async def test_the_audit_list_pages_newest_first(store: Store) -> None:
    sid = await new_session(store)
    for i in range(3):
        await store.record_action("admin_test", actor=f"a{i}", session_id=sid)
    async with admin_client(store) as client:
        first = (await client.get("/api/audit", params={"limit": 2})).json()
        rest = (await client.get("/api/audit", params={"limit": 2, "offset": 2})).json()
    assert [e["actor"] for e in first["entries"]] == ["a2", "a1"] and first["next_offset"] == 2
    assert (
        [e["actor"] for e in rest["entries"]] == ["a0"] and rest["total"] == 3 and rest["next_offset"] is None
    )


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/api/sessions/{sid}/compact", {"focus": "x" * 2001}),
        ("POST", "/api/sessions/{sid}/compact", {"unknown": 1}),
        ("POST", "/api/sessions/{sid}/compact", {"by": "a\x00b"}),
        ("POST", "/api/sessions/{sid}/end", ["not", "an", "object"]),
        ("POST", "/api/erase", {"platform": "telegram"}),
        ("POST", "/api/erase", {"platform": " ", "user_id": "u", "confirm": " :u"}),
        ("GET", "/api/erase?platform=telegram", None),
        ("GET", "/api/audit?limit=0", None),
        ("GET", "/api/audit?offset=-1", None),
    ],
)
async def test_bad_action_requests_are_400_with_a_message(
    store: Store, method: str, path: str, body: object
) -> None:
    sid = await new_session(store)
    async with admin_client(store) as client:
        response = await client.request(method, path.format(sid=sid), json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]


@pytest.mark.parametrize("action", ["compact", "restore", "end"])
async def test_actions_on_an_unknown_session_are_404(store: Store, action: str) -> None:
    async with admin_client(store) as client:
        response = await client.post(f"/api/sessions/{'b' * 32}/{action}")
    assert response.status_code in (404, 503) if action == "compact" else response.status_code == 404


async def test_forget_sets_a_named_range_aside_audited_and_restore_brings_it_back(store: Store) -> None:
    sid = await long_session(store, 12)
    before = await store.load_active(sid)
    named = before[4:8]
    async with summarizer() as engine, admin_client(store, engine=engine, window=8000) as client:
        response = await client.post(
            f"/api/sessions/{sid}/forget",
            json={"from_id": named[0].id, "to_id": named[-1].id, "by": "alice"},
        )
        assert response.status_code == 200, response.text
        [entry] = await audit_entries(client)
        record = response.json()["compaction"]
        assert (record["strategy"], record["messages_archived"]) == ("snip", 4)
        assert record["tokens_freed"] == record["tokens_before"] - record["tokens_after"] > 0
        assert entry["event"] == "admin_forget" and entry["counts"]["archived"] == 4
        archived = [m.id for m in (await store.recall(sid, compaction_id=record["id"])).messages]
        assert archived == [m.id for m in named]
        restored = await client.post(f"/api/sessions/{sid}/restore")
        assert restored.status_code == 200
    assert [m.id for m in await store.load_active(sid)] == [m.id for m in before]


async def test_forget_without_a_range_is_400(store: Store) -> None:
    sid = await long_session(store, 6)
    async with summarizer() as engine, admin_client(store, engine=engine, window=8000) as client:
        response = await client.post(f"/api/sessions/{sid}/forget", json={})
    assert response.status_code == 400
    assert await store.list_compactions(sid) == []
