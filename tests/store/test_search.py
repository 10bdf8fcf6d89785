"""Full-text search on both engines: archived rows, filters, highlights, hostile input."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import inspect

from agent.types import HIT_END, HIT_START, ChatMessage, Insertion, SearchFilters, snippet_parts
from gateway.store.repository import Store
from tests.store.helpers import append_turns, new_session, summary_plan

ALL = SearchFilters()


async def test_finds_words_that_exist_only_in_archived_rows(store: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("we met at the zanzibar conference"))
    msgs = await append_turns(store, sid, 4)
    await store.archive_and_summarize(
        sid, summary_plan([*(await store.load_active(sid))[:3]], "talked a lot")
    )
    assert not any("zanzibar" in m.text for m in await store.load_active(sid))

    [hit] = await store.search("zanzibar", ALL)
    assert (hit.active, hit.compacted, hit.session_id) == (False, True, sid)
    assert hit.compaction_id is not None
    assert await store.search("zanzibar", SearchFilters(state="active")) == []
    assert [h.message_id for h in await store.search("zanzibar", SearchFilters(state="archived"))] == [
        hit.message_id
    ]
    assert msgs  # the tail stays active


def marked(snippet: str) -> list[str]:
    return [text for text, match in snippet_parts(snippet) if match]


async def test_snippet_marks_matches(store: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("The quick brown fox jumps over the lazy dog"))
    [hit] = await store.search("fox", ALL)
    assert marked(hit.snippet) == ["fox"]
    assert (
        "".join(text for text, _ in snippet_parts(hit.snippet))
        == "The quick brown fox jumps over the lazy dog"
    )


async def test_brackets_in_the_text_are_never_taken_for_a_match(store: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("[alice, 10:23 UTC] the fox said [hello]"))
    [hit] = await store.search("fox", ALL)
    assert marked(hit.snippet) == ["fox"]
    assert "[alice, 10:23 UTC]" in hit.snippet


async def test_marker_characters_in_the_text_cannot_forge_a_match(store: Store) -> None:
    sid = await new_session(store)
    forged = f"{HIT_START}forged{HIT_END} and a real fox {HIT_END}"
    await store.append_message(sid, ChatMessage.user(forged))
    [hit] = await store.search("fox", ALL)
    assert marked(hit.snippet) == ["fox"]


async def test_rows_retired_by_a_restore_are_not_found(store: Store) -> None:
    sid = await new_session(store)
    msgs = await append_turns(store, sid, 6)
    await store.archive_and_summarize(sid, summary_plan(msgs[1:4], "the quokka summary"))
    assert len(await store.search("quokka", ALL)) == 1
    await store.restore_latest_compaction(sid)
    assert await store.search("quokka", ALL) == []
    assert await store.search("quokka", SearchFilters(state="archived")) == []


async def test_a_pruned_copy_does_not_duplicate_its_archived_original(store: Store) -> None:
    sid = await new_session(store)
    original = await store.append_message(sid, ChatMessage.user("the wombat log: " + "line " * 50))
    await append_turns(store, sid, 3)
    assert original.id is not None
    copy = ChatMessage.user("the wombat log: [pruned]")
    plan = dataclasses.replace(
        summary_plan([original], "summary"),
        insertions=(Insertion(anchor_id=original.id, message=copy),),
    )
    await store.archive_and_summarize(sid, plan)
    assert [h.message_id for h in await store.search("wombat", ALL)] == [original.id]
    assert [h.message_id for h in await store.search("wombat", SearchFilters(state="archived"))] == [
        original.id
    ]
    [active] = await store.search("wombat", SearchFilters(state="active"))
    assert active.active and active.message_id != original.id


async def test_phrase_prefix_and_exclusion(store: Store) -> None:
    sid = await new_session(store)
    a = await store.append_message(sid, ChatMessage.user("deploy the staging cluster tonight"))
    b = await store.append_message(sid, ChatMessage.user("the cluster staging area is full"))
    c = await store.append_message(sid, ChatMessage.user("deployment of production went fine"))

    assert {h.message_id for h in await store.search('"staging cluster"', ALL)} == {a.id}
    assert {h.message_id for h in await store.search("deploy*", ALL)} == {a.id, c.id}
    assert {h.message_id for h in await store.search("cluster -tonight", ALL)} == {b.id}
    assert {h.message_id for h in await store.search('cluster -"staging cluster"', ALL)} == {b.id}


async def test_ranks_the_better_match_first(store: Store) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("apple " + "filler " * 40))
    best = await store.append_message(sid, ChatMessage.user("apple apple apple pie"))
    hits = await store.search("apple", ALL)
    assert hits[0].message_id == best.id and hits[0].rank >= hits[1].rank


async def test_filters_by_platform_chat_session_user_and_time(store: Store) -> None:
    tg = await new_session(store, "telegram:1", platform="telegram", chat_id="1")
    dc = await new_session(store, "discord:9", platform="discord", chat_id="9")
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    old = await store.append_message(tg, ChatMessage.user("marmalade", author_id="u1", created_at=t0))
    new = await store.append_message(
        tg, ChatMessage.user("marmalade", author_id="u2", created_at=t0 + timedelta(days=2))
    )
    other = await store.append_message(dc, ChatMessage.user("marmalade", author_id="u1", created_at=t0))

    async def found(**kw: object) -> set[int | None]:
        return {h.message_id for h in await store.search("marmalade", SearchFilters(**kw))}  # type: ignore[arg-type]

    assert await found() == {old.id, new.id, other.id}
    assert await found(platform="discord") == {other.id}
    assert await found(chat_id="1") == {old.id, new.id}
    assert await found(session_id=tg) == {old.id, new.id}
    assert await found(user_id="u1") == {old.id, other.id}
    assert await found(since=t0 + timedelta(days=1)) == {new.id}
    assert await found(until=t0 + timedelta(days=1)) == {old.id, other.id}


async def test_limit_and_offset_page_through_hits(store: Store) -> None:
    sid = await new_session(store)
    for i in range(5):
        await store.append_message(sid, ChatMessage.user(f"kiwi number {i}"))
    first, rest = (
        await store.search("kiwi", ALL, limit=2),
        await store.search("kiwi", ALL, limit=10, offset=2),
    )
    assert len(first) == 2 and len(rest) == 3
    assert not {h.message_id for h in first} & {h.message_id for h in rest}


async def test_diacritics_and_case_are_ignored_on_sqlite(store: Store) -> None:
    if store.db.dialect != "sqlite":
        pytest.skip("PostgreSQL's 'simple' configuration keeps accents")
    sid = await new_session(store)
    m = await store.append_message(sid, ChatMessage.user("Un Café au lait"))
    assert [h.message_id for h in await store.search("cafe", ALL)] == [m.id]


HOSTILE = [
    '"',
    '""',
    "AND OR NOT",
    "*",
    "NEAR(",
    "'; DROP TABLE messages; --",
    "\U0001f600" * 2500,  # 10 KB of emoji
    "\x00",
    "ab\x00cd",
    "-",
    "-*",
    "(",
    ")",
    "^",
    ":",
    "col:value",
    "\\",
    "!()&|<->",
    "''",
    "%_",
]


@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
async def test_hostile_queries_return_a_clean_empty_result(store: Store, query: str) -> None:
    sid = await new_session(store)
    await store.append_message(sid, ChatMessage.user("an ordinary message about nothing in particular"))
    assert await store.search(query, ALL) == []
    assert len(await store.load_active(sid)) == 1
    async with store.db.engine.connect() as conn:
        tables = await conn.run_sync(lambda c: inspect(c).get_table_names())
    assert "messages" in tables


async def test_operator_words_are_searched_literally(store: Store) -> None:
    sid = await new_session(store)
    m = await store.append_message(sid, ChatMessage.user("this AND that, OR else NOT near"))
    assert [h.message_id for h in await store.search("AND OR NOT", ALL)] == [m.id]
    assert [h.message_id for h in await store.search("NEAR(", ALL)] == [m.id]


async def test_recent_order_lists_the_newest_hit_first(store: Store) -> None:
    sid = await new_session(store)
    best = await store.append_message(sid, ChatMessage.user("mango mango mango mango"))
    newest = await store.append_message(sid, ChatMessage.user("mango " + "filler " * 40))
    assert [h.message_id for h in await store.search("mango", ALL)] == [best.id, newest.id]
    assert [h.message_id for h in await store.search("mango", ALL, sort="recent")] == [newest.id, best.id]


CORPUS_WORDS = ["alpha", "beta", "gamma", "delta", "getAlphaBeta", "数据", "数据库", "カタカナ", "omega"]
QUERIES = ["alpha", "beta -gamma", '"alpha beta"', "alph*", "alphabeta", "数据", "カタカナ -alpha", "lpha"]


@pytest.mark.parametrize("window", [3, 10_000])
async def test_both_orders_and_every_paging_return_the_same_hits(store: Store, window: int) -> None:
    rng = random.Random(5)
    sid = await new_session(store)
    for _ in range(60):
        await store.append_message(
            sid, ChatMessage.user(" ".join(rng.choices(CORPUS_WORDS, k=rng.randint(1, 6))))
        )
    store.rank_window = window
    for query in QUERIES:
        whole = [h.message_id for h in await store.search(query, ALL, limit=100)]
        recent_hits = await store.search(query, ALL, limit=100, sort="recent")
        recent = [h.message_id for h in recent_hits]
        paged = [
            h.message_id for i in range(0, 100, 7) for h in await store.search(query, ALL, limit=7, offset=i)
        ]
        assert sorted(whole) == sorted(recent) and len(set(whole)) == len(whole), query
        assert paged == whole, query
        tiers = [[h.message_id for h in recent_hits if h.substring is tier] for tier in (False, True)]
        assert [h.message_id for h in recent_hits] == tiers[0] + tiers[1], query
        assert all(tier == sorted(tier, reverse=True) for tier in tiers), query


async def test_relevance_past_the_rank_window_continues_newest_first(store: Store) -> None:
    sid = await new_session(store)
    ids = [
        (await store.append_message(sid, ChatMessage.user(f"lychee {'lychee ' * (i % 3)}"))).id
        for i in range(9)
    ]
    store.rank_window = 4
    hits = await store.search("lychee", ALL)
    newest_four = sorted(ids, reverse=True)[:4]
    assert sorted(h.message_id for h in hits[:4]) == sorted(newest_four)
    assert [h.message_id for h in hits[4:]] == sorted(ids, reverse=True)[4:]
    assert hits[0].rank >= hits[3].rank
