"""Finding sessions and reading cost through the admin API, on every engine."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent.types import ChatMessage, Usage, UsageRecord
from gateway.store.repository import Store
from tests.gateway.admin_support import admin_client
from tests.store.helpers import append_turns, new_session, summary_plan

DAY = datetime(2026, 11, 2, 12, tzinfo=UTC)


async def three_sessions(store: Store) -> dict[str, str]:
    """a: telegram, big context, cheap; b: discord, costly, two compactions; c: telegram, ended."""
    a = await new_session(store, "telegram:dm:100", chat_id="100")
    b = await new_session(store, "discord:group:7", platform="discord", chat_id="7")
    c = await new_session(store, "telegram:group:-5", chat_id="-5")
    await store.append_message(b, ChatMessage.user("hi", author_id="u42", author_name="Zoe"))
    turns = await append_turns(store, b, 8)
    await store.archive_and_summarize(b, summary_plan(turns[0:2]))
    await store.archive_and_summarize(b, summary_plan(turns[2:4]))
    await store.record_usage(a, UsageRecord("m", "chat", Usage(10, 1, 0, 0), 0.01), at=DAY)
    await store.record_usage(b, UsageRecord("m", "chat", Usage(10, 1, 0, 0), 3.0), at=DAY)
    for sid, tokens in ((a, 90_000), (b, 5_000)):
        state = await store.load_context_state(sid)
        state.last_prompt_tokens = tokens
        await store.save_context_state(sid, state)
    await store.end_session(c, "new")
    await store.touch_session(a, datetime(2026, 11, 3, tzinfo=UTC))
    await store.touch_session(b, datetime(2026, 11, 2, tzinfo=UTC))
    await store.touch_session(c, datetime(2026, 11, 1, tzinfo=UTC))
    return {"a": a, "b": b, "c": c}


async def keys(client: object, **params: object) -> list[str]:
    response = await client.get("/api/sessions", params=params)  # type: ignore[attr-defined]
    assert response.status_code == 200, response.text
    return [r["key"] for r in response.json()]


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("activity", ["telegram:dm:100", "discord:group:7", "telegram:group:-5"]),
        ("size", ["telegram:dm:100", "discord:group:7", "telegram:group:-5"]),
        ("cost", ["discord:group:7", "telegram:dm:100", "telegram:group:-5"]),
        ("compactions", ["discord:group:7", "telegram:dm:100", "telegram:group:-5"]),
    ],
)
async def test_sessions_sort_by_activity_size_cost_and_compactions(
    store: Store, sort: str, expected: list[str]
) -> None:
    await three_sessions(store)
    async with admin_client(store) as client:
        assert await keys(client, sort=sort) == expected
        assert (await keys(client, sort=sort, order="asc"))[-1] == expected[0]


async def test_session_rows_carry_counts_cost_and_context_size(store: Store) -> None:
    ids = await three_sessions(store)
    async with admin_client(store) as client:
        rows = (await client.get("/api/sessions", params={"sort": "cost"})).json()
    b = rows[0]
    assert (b["id"], b["active"], b["archived"], b["compactions"], b["cost_usd"]) == (ids["b"], 7, 4, 2, 3.0)
    assert rows[1]["last_prompt_tokens"] == 90_000


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"platform": "discord"}, ["discord:group:7"]),
        ({"chat": "100"}, ["telegram:dm:100"]),
        ({"user": "u42"}, ["discord:group:7"]),
        ({"key": "GROUP"}, ["discord:group:7", "telegram:group:-5"]),
        ({"key": "%"}, []),
        ({"since": "2026-11-02T00:00:00Z"}, ["telegram:dm:100", "discord:group:7"]),
        ({"active_only": "true"}, ["telegram:dm:100", "discord:group:7"]),
    ],
)
async def test_sessions_filter_by_platform_chat_user_key_and_activity(
    store: Store, params: dict[str, str], expected: list[str]
) -> None:
    await three_sessions(store)
    async with admin_client(store) as client:
        assert await keys(client, **params) == expected


async def test_sessions_page_and_say_how_many_match(store: Store) -> None:
    await three_sessions(store)
    async with admin_client(store) as client:
        first = await client.get("/api/sessions", params={"limit": 2})
        rest = await client.get("/api/sessions", params={"limit": 2, "offset": 2})
        beyond = await client.get("/api/sessions", params={"offset": 1_000_000_000})
    assert first.headers["x-total-count"] == "3" and len(first.json()) == 2
    assert [r["key"] for r in rest.json()] == ["telegram:group:-5"]
    assert beyond.status_code == 200 and beyond.json() == []


@pytest.mark.parametrize(
    "params",
    [
        {"sort": "loudness"},
        {"order": "sideways"},
        {"limit": 0},
        {"limit": 1001},
        {"offset": -1},
        {"offset": 10**12},
        {"since": "last tuesday"},
        {"since": "0001-01-01T00:00:00+05:00"},
        {"key": "k" * 300},
        {"chat": "a\x00b"},
    ],
)
async def test_bad_session_list_parameters_are_400_with_a_message(
    store: Store, params: dict[str, object]
) -> None:
    async with admin_client(store) as client:
        response = await client.get("/api/sessions", params=params)
    assert response.status_code == 400, response.text
    assert next(iter(params)) in response.json()["error"]


async def test_search_hits_carry_the_session_key_and_platform(store: Store) -> None:
    ids = await three_sessions(store)
    await store.append_message(ids["a"], ChatMessage.user("where is the walrus"))
    async with admin_client(store) as client:
        [hit] = (await client.get("/api/search", params={"q": "walrus"})).json()
    assert (hit["session_id"], hit["session_key"], hit["platform"]) == (
        ids["a"],
        "telegram:dm:100",
        "telegram",
    )


async def test_usage_by_day_session_and_platform_with_the_cache_hit_ratio(store: Store) -> None:
    ids = await three_sessions(store)
    await store.record_usage(ids["a"], UsageRecord("m", "chat", Usage(100, 10, 100, 800), 0.5), at=DAY)
    async with admin_client(store) as client:
        by_day = (await client.get("/api/usage", params={"group_by": "day"})).json()
        by_session = (await client.get("/api/usage", params={"group_by": "session", "limit": 1})).json()
        by_platform = (await client.get("/api/usage", params={"group_by": "platform"})).json()
        later = (await client.get("/api/usage", params={"since": "2026-11-03"})).json()
    [day] = by_day["rows"]
    assert day["key"] == "2026-11-02" and day["calls"] == 3 and day["cost_usd"] == 3.51
    assert (day["input"], day["cache_write"], day["cache_read"], day["output"]) == (120, 100, 800, 12)
    assert day["cache_hit_ratio"] == round(800 / 1020, 4)
    assert by_session["groups"] == 2 and by_session["next_offset"] == 1
    assert by_session["rows"][0]["label"] == "discord:group:7 (discord)"
    assert [r["key"] for r in by_platform["rows"]] == ["discord", "telegram"]
    assert by_platform["totals"]["cost_usd"] == 3.51
    assert later["rows"] == [] and later["totals"]["calls"] == 0


@pytest.mark.parametrize(
    "params",
    [
        {"group_by": "week"},
        {"since": "soon"},
        {"until": "9999-12-31T23:00:00-05:00"},
        {"limit": 0},
        {"offset": -5},
        {"session": "../etc"},
    ],
)
async def test_bad_usage_parameters_are_400_or_404_never_5xx(store: Store, params: dict[str, object]) -> None:
    async with admin_client(store) as client:
        response = await client.get("/api/usage", params=params)
    assert response.status_code in (400, 404), response.text
    assert response.json()["error"]
