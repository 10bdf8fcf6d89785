"""The admin JSON API in-process (httpx over ASGI), on every database engine the tests have."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.types import ChatMessage, EngineFailure, StrategyRun, snippet_parts
from gateway.store.db import Database
from gateway.store.repository import Store
from tests.gateway.admin_support import TOKEN, XSS, admin_client, seed
from tests.store.helpers import new_session

PROTECTED = [
    ("GET", "/api/sessions"),
    ("GET", "/api/sessions/abc"),
    ("GET", "/api/sessions/abc/messages"),
    ("GET", "/api/sessions/abc/context"),
    ("GET", "/api/search?q=x"),
    ("POST", "/api/sessions/abc/restore"),
    ("GET", "/metrics"),
    ("GET", "/"),
    ("GET", "/sessions/abc"),
    ("GET", "/search?q=x"),
    ("GET", "/no/such/route"),
]


@pytest.fixture
def bare_store() -> Store:
    """A store never connected: for what is decided before any database access (auth)."""
    return Store(Database("sqlite+aiosqlite://"))


async def test_healthz_needs_no_token_and_says_the_database_answers(store: Store) -> None:
    async with admin_client(store, authed=False) as client:
        response = await client.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"ok": True})


async def test_healthz_is_503_when_the_database_is_gone(database: Database) -> None:
    store = Store(database)
    await database.dispose()
    async with admin_client(store, authed=False) as client:
        response = await client.get("/healthz")
    assert (response.status_code, response.json()) == (503, {"ok": False})


@pytest.mark.parametrize(("method", "path"), PROTECTED)
async def test_every_route_but_healthz_is_401_without_the_token(
    bare_store: Store, method: str, path: str
) -> None:
    async with admin_client(bare_store, authed=False) as client:
        response = await client.request(method, path)
    assert response.status_code == 401
    assert "token" in response.json()["error"]
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "header",
    [
        b"Bearer wrong",
        f"Bearer {TOKEN}x".encode(),
        f"Basic {TOKEN}".encode(),
        b"Bearer",
        "Bearer ünïcode".encode(),
    ],
)
async def test_a_wrong_token_is_401(bare_store: Store, header: bytes) -> None:
    async with admin_client(bare_store, authed=False) as client:
        response = await client.get("/api/sessions", headers={b"Authorization": header})
    assert response.status_code == 401


async def test_the_token_never_appears_in_an_answer(bare_store: Store) -> None:
    async with admin_client(bare_store, authed=False) as client:
        response = await client.get("/api/sessions", headers={"Authorization": "Bearer nope"})
    assert TOKEN not in response.text


async def test_list_sessions_gives_counts_and_filters(store: Store) -> None:
    seeded = await seed(store)
    ended = await new_session(store, "discord:7", platform="discord", chat_id="7")
    await store.end_session(ended, "reset")
    async with admin_client(store) as client:
        everything = (await client.get("/api/sessions")).json()
        current = (await client.get("/api/sessions", params={"active_only": "true"})).json()
        discord = (await client.get("/api/sessions", params={"platform": "discord"})).json()
        second_page = (await client.get("/api/sessions", params={"limit": 1, "offset": 1})).json()
    assert {s["id"] for s in everything} == {seeded.session_id, ended}
    row = next(s for s in everything if s["id"] == seeded.session_id)
    assert (row["active"], row["archived"], row["compactions"]) == (5, 7, 2)
    assert "system_prompt" not in row
    assert [s["id"] for s in current] == [seeded.session_id]
    assert [s["id"] for s in discord] == [ended] and discord[0]["ended"] is True
    assert len(second_page) == 1


async def test_show_session_has_compactions_counts_and_usage(store: Store) -> None:
    seeded = await seed(store)
    async with admin_client(store) as client:
        body = (await client.get(f"/api/sessions/{seeded.session_id}")).json()
    assert body["session"]["id"] == seeded.session_id
    assert body["session"]["system_prompt"] == "You are helpful."
    assert body["counts"] == {"active": 5, "archived": 7}
    assert [c["trigger"] for c in body["compactions"]] == ["hygiene", "manual"]
    assert body["usage"]["calls"] == 6


@pytest.mark.parametrize("session_id", ["0" * 32, "no-such", "%00", "x" * 500, "..%2F..%2Fetc"])
async def test_an_unknown_session_is_404(store: Store, session_id: str) -> None:
    async with admin_client(store) as client:
        for path in ("", "/messages", "/context"):
            response = await client.get(f"/api/sessions/{session_id}{path}")
            assert response.status_code == 404, path
            assert "error" in response.json()


async def test_messages_are_paged_in_order_with_archived_ones(store: Store) -> None:
    seeded = await seed(store)
    async with admin_client(store) as client:
        first = (await client.get(f"/api/sessions/{seeded.session_id}/messages", params={"limit": 5})).json()
        rest = (
            await client.get(
                f"/api/sessions/{seeded.session_id}/messages", params={"offset": first["next_offset"]}
            )
        ).json()
        archived = (
            await client.get(f"/api/sessions/{seeded.session_id}/messages", params={"state": "archived"})
        ).json()
        active = (
            await client.get(f"/api/sessions/{seeded.session_id}/messages", params={"state": "active"})
        ).json()
    assert (first["total"], len(first["messages"]), first["next_offset"]) == (12, 5, 5)
    assert rest["next_offset"] is None and len(rest["messages"]) == 7
    assert first["messages"][0]["text"] == "message 0" and first["messages"][0]["compacted"] is True
    assert all(not m["active"] for m in archived["messages"]) and archived["total"] == 7
    assert active["messages"][0]["kind"] == "summary"
    assert any(XSS in m["text"] for m in active["messages"])


async def test_bad_paging_parameters_are_400_with_a_message(store: Store) -> None:
    seeded = await seed(store)
    async with admin_client(store) as client:
        for params in ({"state": "deleted"}, {"limit": 0}, {"offset": -1}, {"limit": "many"}):
            response = await client.get(f"/api/sessions/{seeded.session_id}/messages", params=params)
            assert response.status_code == 400, params
            assert next(iter(params)) in response.json()["error"]


async def test_search_finds_archived_and_active_messages_with_filters(store: Store) -> None:
    seeded = await seed(store)
    other = await new_session(store, "discord:9", platform="discord", chat_id="9")
    await store.append_message(other, ChatMessage.user("message from discord"))
    async with admin_client(store) as client:
        hits = (await client.get("/api/search", params={"q": "message"})).json()
        archived = (await client.get("/api/search", params={"q": "message", "state": "archived"})).json()
        telegram = (await client.get("/api/search", params={"q": "message", "platform": "telegram"})).json()
        in_chat = (await client.get("/api/search", params={"q": "message", "chat": "9"})).json()
        by_session = (await client.get("/api/search", params={"q": "discord", "session": other})).json()
        future = (
            await client.get("/api/search", params={"q": "message", "since": "2999-01-01T00:00:00"})
        ).json()
    assert any(not h["active"] for h in hits) and any(h["active"] for h in hits)
    assert archived and all(h["compacted"] for h in archived)
    assert {h["session_id"] for h in telegram} == {seeded.session_id}
    assert {h["session_id"] for h in in_chat} == {other}
    assert [h["session_id"] for h in by_session] == [other]
    assert ("discord", True) in snippet_parts(by_session[0]["snippet"])
    assert future == []


WEIRD = [
    '"',
    '""',
    "NEAR(",
    "NEAR(a b",
    "'; DROP TABLE messages; --",
    "a\x00b",
    "\x00",
    "*",
    "-",
    "-x",
    "((",
    "🙂" * 2500,  # 10 KB of emoji
    "AND OR NOT",
    "\\",
    "%",
    "'",
    ":*",
    "a:*|b&!c",
]


async def test_any_query_however_weird_is_200_and_finds_nothing(store: Store) -> None:
    await seed(store)
    async with admin_client(store) as client:
        for query in WEIRD:
            response = await client.get("/api/search", params={"q": query})
            assert (response.status_code, response.json()) == (200, []), repr(query[:20])


async def test_the_messages_table_survives_a_hostile_query(store: Store) -> None:
    seeded = await seed(store)
    async with admin_client(store) as client:
        await client.get("/api/search", params={"q": "'; DROP TABLE messages; --"})
        response = await client.get(f"/api/sessions/{seeded.session_id}/messages")
    assert response.json()["total"] == 12


@pytest.mark.parametrize(
    "params",
    [
        {"q": "x", "state": "gone"},
        {"q": "x", "limit": 0},
        {"q": "x", "limit": 100_000},
        {"q": "x", "since": "yesterday"},
        {"q": "x", "platform": "tele\x00gram"},
        {"q": "x", "user": "u" * 1000},
        {"q": "x", "offset": 10**30},
    ],
)
async def test_bad_search_parameters_are_400_with_a_message(
    bare_store: Store, params: dict[str, str | int]
) -> None:
    async with admin_client(bare_store) as client:
        response = await client.get("/api/search", params=params)
    assert response.status_code == 400
    assert list(params)[-1] in response.json()["error"]


async def test_restore_undoes_the_latest_compaction_then_404_when_none_is_left(store: Store) -> None:
    seeded = await seed(store)
    url = f"/api/sessions/{seeded.session_id}/restore"
    async with admin_client(store) as client:
        first = await client.post(url)
        second = await client.post(url)
        third = await client.post(url)
        counts = (await client.get(f"/api/sessions/{seeded.session_id}")).json()["counts"]
    assert first.status_code == 200 and first.json()["id"] == seeded.compactions[1].id
    assert first.json()["restored_at"] is not None
    assert second.json()["id"] == seeded.compactions[0].id
    assert third.status_code == 404 and "no compaction" in third.json()["error"]
    assert counts == {"active": 10, "archived": 0}


async def test_restore_of_an_unknown_session_is_404(store: Store) -> None:
    async with admin_client(store) as client:
        response = await client.post(f"/api/sessions/{'f' * 32}/restore")
    assert response.status_code == 404


async def test_context_series_has_each_call_and_each_compaction(store: Store) -> None:
    seeded = await seed(store)
    async with admin_client(store) as client:
        body = (await client.get(f"/api/sessions/{seeded.session_id}/context")).json()
    assert [c["prompt_tokens"] for c in body["calls"]] == [1000, 3000, 9000, 2500, 7000, 2000]
    assert [(c["trigger"], c["tokens_before"], c["tokens_after"]) for c in body["compactions"]] == [
        ("hygiene", 1000, 200),
        ("manual", 1000, 200),
    ]
    assert all(c["at"] for c in body["calls"] + body["compactions"])


async def test_metrics_text_parses_and_counts_the_store(store: Store) -> None:
    await seed(store)
    async with admin_client(store) as client:
        response = await client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }
    assert samples[("hygieia_sessions", (("state", "current"),))] == 1
    assert samples[("hygieia_messages", (("state", "active"),))] == 5
    assert samples[("hygieia_messages", (("state", "archived"),))] == 7
    assert samples[("hygieia_compactions", (("trigger", "hygiene"),))] == 1
    assert samples[("hygieia_compactions", (("trigger", "manual"),))] == 1
    assert samples[("hygieia_compactions", (("trigger", "reactive"),))] == 0


async def test_metrics_count_runs_and_tokens_freed_per_strategy_and_engine_failures(store: Store) -> None:
    seeded = await seed(store)
    await store.record_engine_failure(
        seeded.session_id, EngineFailure("lossless", "compress", "timeout", "slow")
    )
    await store.record_engine_failure(None, EngineFailure("lossless", "compress", "timeout", "slow"))
    async with admin_client(store) as client:
        response = await client.get("/metrics")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }
    freed = sum(c.tokens_before - c.tokens_after for c in seeded.compactions)
    assert samples[("hygieia_strategy_runs", (("strategy", "summary"),))] == len(seeded.compactions)
    assert samples[("hygieia_strategy_tokens_freed", (("strategy", "summary"),))] == freed
    assert samples[("hygieia_strategy_runs", (("strategy", "prune"),))] == 0
    assert samples[("hygieia_context_engine_failures", (("engine", "lossless"), ("kind", "timeout")))] == 2


async def test_metrics_count_the_apis_clearing_which_makes_no_compaction_row(store: Store) -> None:
    seeded = await seed(store)
    for cleared in (4000, 5500):
        await store.record_strategy_run(seeded.session_id, StrategyRun("server_clearing", cleared))
    async with admin_client(store) as client:
        response = await client.get("/metrics")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }
    assert samples[("hygieia_strategy_runs", (("strategy", "server_clearing"),))] == 2
    assert samples[("hygieia_strategy_tokens_freed", (("strategy", "server_clearing"),))] == 9500
    assert samples[("hygieia_strategy_runs", (("strategy", "summary"),))] == len(seeded.compactions)


async def test_a_database_failure_is_503_not_500(database: Database) -> None:
    store = Store(database)
    await database.dispose()
    async with admin_client(store) as client:
        response = await client.get("/api/sessions")
    assert response.status_code == 503 and "database" in response.json()["error"]


@pytest.mark.parametrize(
    "query",
    [
        "since=0001-01-01T00:00:00%2B05:00",
        "until=9999-12-31T23:59:59-05:00",
        "since=0001-01-01T03:00:00%2B04:00&until=9999-12-31T23:00:00Z",
    ],
)
async def test_a_search_time_that_overflows_in_utc_is_a_400_naming_it(store: Store, query: str) -> None:
    async with admin_client(store) as client:
        response = await client.get(f"/api/search?q=x&{query}")
    assert response.status_code == 400
    error = response.json()["error"]
    assert ("since" in error or "until" in error) and "range" in error
