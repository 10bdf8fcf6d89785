"""The turn claim: the caller's plan decides inside the claim's transaction what to append, and
the claim and the appends commit together or not at all."""

from __future__ import annotations

import pytest

from agent.clock import utcnow
from agent.types import ChatMessage
from gateway.store.records import InboxRecord, SessionInfo
from gateway.store.repository import Store
from gateway.store.turn_ops import ClaimPlan
from tests.store.helpers import new_session


def said(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=[{"type": "text", "text": text}])


async def put(store: Store, pmid: str, key: str = "telegram:1") -> int:
    item, _ = await store.inbox_put(
        platform="telegram",
        chat_id="1",
        platform_message_id=pmid,
        session_key=key,
        payload={"text": pmid},
        addressed=True,
    )
    return item


def appending(*texts: str) -> ClaimPlan:
    return lambda items, session: [said(t) for t in texts]


async def test_what_the_plan_appends_commits_with_the_claim(store: Store) -> None:
    sid = await new_session(store)
    item = await put(store, "1")
    seen: list[tuple[list[int], str]] = []

    def plan(items: list[InboxRecord], session: SessionInfo) -> list[ChatMessage]:
        seen.append(([r.id for r in items], session.id))
        return [said("hello")]

    claim = await store.claim_turn(
        worker="w", lease_seconds=60, session_key="telegram:1", plan=plan, at=utcnow()
    )

    assert seen == [([item], sid)]
    assert [r.id for r in claim.items] == [item]
    assert claim.session is not None and claim.session.id == sid
    assert claim.appended is not None
    assert [m.text for m in claim.appended.view] == ["hello"]
    assert [m.text for m in await store.load_active(sid)] == ["hello"]
    assert (await store.inbox_get(item)).status == "processing"


async def test_an_error_in_the_plan_rolls_back_claim_and_appends(store: Store) -> None:
    sid = await new_session(store)
    item = await put(store, "1")

    def plan(items: list[InboxRecord], session: SessionInfo) -> list[ChatMessage]:
        raise RuntimeError("the plan changed its mind")

    with pytest.raises(RuntimeError):
        await store.claim_turn(worker="w", lease_seconds=60, session_key="telegram:1", plan=plan)
    assert await store.load_active(sid) == []
    again = await store.inbox_get(item)
    assert again.status == "pending" and again.attempts == 0


async def test_a_plan_of_none_claims_and_appends_nothing(store: Store) -> None:
    sid = await new_session(store)
    item = await put(store, "1")
    claim = await store.claim_turn(
        worker="w", lease_seconds=60, session_key="telegram:1", plan=lambda items, session: None
    )
    assert [r.id for r in claim.items] == [item] and claim.appended is None
    assert await store.load_active(sid) == []


async def test_a_claim_of_nothing_reads_no_session_and_runs_no_plan(store: Store) -> None:
    await new_session(store)
    called: list[str] = []

    def plan(items: list[InboxRecord], session: SessionInfo) -> list[ChatMessage]:
        called.append(session.id)
        return [said("hello")]

    claim = await store.claim_turn(worker="w", lease_seconds=60, session_key="telegram:1", plan=plan)
    assert claim.items == [] and claim.session is None and claim.appended is None
    assert called == []


async def test_a_claim_extends_the_cached_view_of_the_session(store: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, said("before"))
    await store.load_active(sid)  # cached
    await put(store, "1")
    hits = store._views.hits
    claim = await store.claim_turn(
        worker="w", lease_seconds=60, session_key="telegram:1", plan=appending("hello"), at=utcnow()
    )
    assert claim.appended is not None
    assert [m.text for m in claim.appended.view] == ["before", "hello"]
    assert store._views.hits == hits + 1
