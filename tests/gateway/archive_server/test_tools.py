"""The archive's tools through the SDK's client, over stdio to a child ``hygieia mcp serve``."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

from mcp import Client, StdioServerParameters

from gateway.store.db import Database
from gateway.store.repository import Store
from tests.gateway.archive_server.conftest import RARE_WORD, Archive, answer, error_text


def _client(archive: Archive) -> Client:
    return Client(
        StdioServerParameters(
            command=sys.executable, args=["-m", "gateway.cli", "mcp", "serve"], env=archive.env
        )
    )


async def test_the_server_offers_exactly_the_three_read_only_tools(archive: Archive) -> None:
    async with _client(archive) as client:
        listed = await client.list_tools()
    assert sorted(t.name for t in listed.tools) == ["get_message", "read_session", "search_sessions"]


async def test_search_finds_a_word_only_an_archived_message_holds(archive: Archive) -> None:
    async with _client(archive) as client:
        found = answer(await client.call_tool("search_sessions", {"query": RARE_WORD}))
    hits: list[Any] = found["hits"]
    assert [(h["message_id"], h["session_id"], h["state"]) for h in hits] == [
        (archive.ids[0], archive.session_id, "archived")
    ]
    assert f"[{RARE_WORD}]" in hits[0]["snippet"]


async def test_search_pages_and_neighbours_work_on_postgresql(pg_archive: Archive) -> None:
    async with _client(pg_archive) as client:
        found = answer(await client.call_tool("search_sessions", {"query": RARE_WORD}))
        page = answer(await client.call_tool("read_session", {"session": pg_archive.session_id[:8]}))
        near = answer(await client.call_tool("get_message", {"message_id": pg_archive.ids[6]}))
    assert [(h["message_id"], h["state"]) for h in found["hits"]] == [(pg_archive.ids[0], "archived")]
    assert page["total"] == len(pg_archive.ids) + 1 and page["messages"][0]["state"] == "archived"
    assert [m["id"] for m in near["messages"]] == pg_archive.ids[3:10]


async def test_search_with_state_active_leaves_the_archived_word_out(archive: Archive) -> None:
    async with _client(archive) as client:
        found = answer(await client.call_tool("search_sessions", {"query": RARE_WORD, "state": "active"}))
    assert found["hits"] == []


async def test_read_session_pages_by_a_short_id_with_archived_messages_marked(archive: Archive) -> None:
    async with _client(archive) as client:
        first = answer(
            await client.call_tool("read_session", {"session": archive.session_id[:8], "limit": 3})
        )
        second = answer(
            await client.call_tool(
                "read_session", {"session": archive.session_id[:8], "offset": 3, "limit": 3}
            )
        )
    rows: list[Any] = first["messages"]
    # The summary sits where the archived turns began; they stay in their places, marked.
    assert [(m["id"], m["kind"], m["state"]) for m in rows] == [
        (archive.ids[0], "message", "archived"),
        (rows[1]["id"], "summary", "active"),
        (archive.ids[1], "message", "archived"),
    ]
    assert first["total"] == len(archive.ids) + 1 and first["next_offset"] == 3
    assert [m["id"] for m in second["messages"]] == archive.ids[2:5]


async def test_get_message_answers_the_message_with_three_neighbours_each_side(archive: Archive) -> None:
    middle = archive.ids[6]
    async with _client(archive) as client:
        found = answer(await client.call_tool("get_message", {"message_id": middle}))
    ids = [m["id"] for m in found["messages"]]
    assert ids == archive.ids[3:10] and found["session_id"] == archive.session_id


async def test_an_unknown_session_is_a_one_line_tool_error(archive: Archive) -> None:
    async with _client(archive) as client:
        text = error_text(await client.call_tool("read_session", {"session": "nosuchsession"}))
    assert "no session id starts with 'nosuchsession'" in text and "Traceback" not in text


async def test_an_unknown_message_and_a_malformed_time_are_tool_errors(archive: Archive) -> None:
    async with _client(archive) as client:
        missing = error_text(await client.call_tool("get_message", {"message_id": 987654}))
        bad_time = error_text(
            await client.call_tool("search_sessions", {"query": RARE_WORD, "since": "last tuesday"})
        )
    assert "no message 987654" in missing
    assert "since: 'last tuesday' is not an ISO 8601 time" in bad_time


async def test_a_malformed_query_finds_nothing_instead_of_failing(archive: Archive) -> None:
    async with _client(archive) as client:
        found = answer(await client.call_tool("search_sessions", {"query": '"unclosed ((( -'}))
    assert found["hits"] == []


async def test_search_applies_the_admin_filters(archive: Archive) -> None:
    wanted = {"query": RARE_WORD, "session": archive.session_id[:8]}
    async with _client(archive) as client:
        console = answer(await client.call_tool("search_sessions", {**wanted, "platform": "console"}))
        telegram = answer(await client.call_tool("search_sessions", {**wanted, "platform": "telegram"}))
        before = answer(await client.call_tool("search_sessions", {**wanted, "until": "2000-01-01"}))
        other_user = answer(await client.call_tool("search_sessions", {**wanted, "user": "bob"}))
    assert [h["message_id"] for h in console["hits"]] == [archive.ids[0]]
    assert telegram["hits"] == before["hits"] == other_user["hits"] == []


async def _more_sessions(url: str, count: int) -> list[str]:
    db = Database(url)
    await db.connect()
    try:
        store = Store(db)
        made = []
        for i in range(count):
            info = await store.get_or_create_session(
                f"console:c{i}", platform="console", chat_id=f"c{i}", system_prompt="sys", model="m"
            )
            made.append(info.id)
        return made
    finally:
        await db.dispose()


async def test_a_start_of_id_several_sessions_share_is_a_tool_error_naming_them(archive: Archive) -> None:
    # 17 ids over 16 hex digits: two share their first character.
    ids = [archive.session_id, *await _more_sessions(archive.env["HYGIEIA_DATABASE_URL"], 16)]
    first = Counter(i[0] for i in ids).most_common(1)[0][0]
    async with _client(archive) as client:
        text = error_text(await client.call_tool("read_session", {"session": first}))
    assert f"sessions have ids starting with '{first}'; give more of it:" in text
    assert all(i in text for i in ids if i.startswith(first))
