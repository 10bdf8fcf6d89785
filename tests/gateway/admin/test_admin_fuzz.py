"""The admin API under fuzzed queries, on every engine: a bad request is a 4xx with a JSON error, never a
5xx (a time near year 1 or 9999, a huge offset, odd Unicode, garbage ids)."""

from __future__ import annotations

from datetime import timedelta, timezone
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.store.repository import Store
from tests.gateway.admin_support import admin_client, seed

OFFSETS = st.integers(-23 * 60, 23 * 60).map(lambda m: timezone(timedelta(minutes=m)))
TIMES = st.one_of(
    st.datetimes(timezones=st.one_of(st.none(), OFFSETS)).map(lambda d: d.isoformat()),
    st.sampled_from(["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-12:00", "0000-01-01", "10000-01-01"]),
    st.text(max_size=30),
)
NUMBERS = st.one_of(st.integers(-(2**70), 2**70).map(str), st.sampled_from(["1e9", "NaN", "-0", "", "0x10"]))
WORDS = st.one_of(
    st.text(max_size=60).filter(lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t)),
    st.sampled_from(['"unclosed', "NEAR(a b", "a OR", "-", "*", "\x00", "'; DROP TABLE messages; --"]),
)
PARAMS = st.dictionaries(
    st.sampled_from(
        ["q", "since", "until", "limit", "offset", "platform", "chat", "session", "user", "state"]
    ),
    st.one_of(TIMES, NUMBERS, WORDS),
    max_size=6,
)
PATHS = st.sampled_from(
    ["/api/search", "/api/sessions", "/api/dead-letters", "/api/sessions/{id}", "/api/sessions/{id}/messages",
     "/api/sessions/{id}/context", "/api/sessions/{id}/dead-letters", "/api/usage"]
)  # fmt: skip
IDS = st.one_of(st.text(max_size=40), st.sampled_from(["..", "%00", "a" * 200, "🙂", "1 OR 1=1"]))


async def fuzz(store: Store, requests: list[tuple[str, str, dict[str, str]]]) -> None:
    existing = await store.list_sessions(limit=1)  # hypothesis reuses the test's store across examples
    session_id = existing[0].id if existing else (await seed(store)).session_id
    async with admin_client(store) as client:
        for path, some_id, params in requests:
            url = path.replace("{id}", quote(some_id, safe="") or session_id)
            response = await client.get(url, params=params)
            assert response.status_code < 500, (url, params, response.text[:300])
            assert response.headers["content-type"].startswith("application/json")


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(requests=st.lists(st.tuples(PATHS, IDS, PARAMS), min_size=1, max_size=10))
async def test_fuzzed_admin_queries_are_never_a_server_error(
    store: Store, requests: list[tuple[str, str, dict[str, str]]]
) -> None:
    await fuzz(store, requests)


@pytest.mark.full
@pytest.mark.timeout(1800)
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(requests=st.lists(st.tuples(PATHS, IDS, PARAMS), min_size=1, max_size=12))
async def test_fuzzed_admin_queries_are_never_a_server_error_full(
    store: Store, requests: list[tuple[str, str, dict[str, str]]]
) -> None:
    await fuzz(store, requests)
