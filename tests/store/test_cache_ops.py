"""The cache diagnostics kept with each call's usage row, counted and listed back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.types import CacheCheck, Usage, UsageRecord
from gateway.store.repository import Store
from tests.store.helpers import new_session

T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)


def _call(check: CacheCheck | None, purpose: str = "chat") -> UsageRecord:
    return UsageRecord("claude-test", purpose, Usage(10, 5, 100, 0), 0.01, cache=check)  # type: ignore[arg-type]


async def test_misses_are_counted_by_reason_cause_and_ours(store: Store) -> None:
    sid = await new_session(store)
    for check in (
        CacheCheck("messages_changed", 900, "compaction", True),
        CacheCheck("messages_changed", 400, "compaction", True),
        CacheCheck("system_changed", 50, "none", False),
        CacheCheck(None, None, "none", False),
        None,
    ):
        await store.record_usage(sid, _call(check))
    await store.record_usage(sid, _call(None, "summary"))

    assert await store.cache_misses() == {
        ("messages_changed", "compaction", True): 2,
        ("system_changed", "none", False): 1,
    }


async def test_a_session_s_last_misses_come_newest_first_with_their_labels(store: Store) -> None:
    sid = await new_session(store)
    other = await new_session(store, "telegram:2", chat_id="2")
    await store.record_usage(other, _call(CacheCheck("unavailable", None, "none", False)), at=T0)
    for minutes, reason in ((1, "tools_changed"), (2, "expired"), (3, "model_changed")):
        cause = "ttl" if reason == "expired" else "catalog"
        check = CacheCheck(reason, 10 * minutes, cause, True)
        await store.record_usage(sid, _call(check), at=T0 + timedelta(minutes=minutes))

    rows = await store.session_cache_misses(sid, limit=2)
    assert [(r.reason, r.cause, r.ours, r.missed_tokens) for r in rows] == [
        ("model_changed", "catalog", True, 30),
        ("expired", "ttl", True, 20),
    ]
    assert rows[0].at == T0 + timedelta(minutes=3)
