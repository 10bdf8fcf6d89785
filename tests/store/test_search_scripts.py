"""Words in any script: CJK words inside sentences, substrings of identifiers, on both engines."""

from __future__ import annotations

import pytest

from agent.types import ChatMessage, SearchFilters, snippet_parts
from gateway.store.repository import Store
from tests.store.helpers import new_session, summary_plan
from tests.store.search_corpus import QUERIES, expected, mixed_messages

ALL = SearchFilters()


async def found(store: Store, query: str, **kw: object) -> list[int]:
    return [h.message_id for h in await store.search(query, ALL, **kw)]  # type: ignore[arg-type]


async def add(store: Store, sid: str, text: str) -> int:
    message = await store.append_message(sid, ChatMessage.user(text))
    assert message.id is not None
    return message.id


async def test_a_two_character_chinese_word_is_found_inside_a_sentence(store: Store) -> None:
    sid = await new_session(store)
    hit = await add(store, sid, "我们今天讨论数据库的设计问题。")
    await add(store, sid, "我们今天讨论天气。")
    assert await found(store, "数据") == [hit]
    [result] = await store.search("数据", ALL)
    assert [t for t, match in snippet_parts(result.snippet) if match] == ["数据"]


async def test_a_katakana_word_is_found_inside_a_japanese_sentence(store: Store) -> None:
    sid = await new_session(store)
    hit = await add(store, sid, "これはカタカナのテストです")
    await add(store, sid, "これはひらがなのテストです")
    assert await found(store, "カタカナ") == [hit]
    assert await found(store, "テスト -カタカナ") != [hit]


async def test_a_korean_word_is_found_with_its_particle_attached(store: Store) -> None:
    sid = await new_session(store)
    hit = await add(store, sid, "내일 서울에서 만나요")
    assert await found(store, "서울") == [hit]


async def test_cjk_characters_that_are_not_side_by_side_do_not_make_a_word(store: Store) -> None:
    sid = await new_session(store)
    await add(store, sid, "数 abc 据")
    await add(store, sid, "他说数。据说")
    assert await found(store, "数据") == []


async def test_part_of_a_code_identifier_is_found(store: Store) -> None:
    sid = await new_session(store)
    hit = await add(store, sid, "the crash is in getUserProfileById() again")
    await add(store, sid, "nothing to see here")
    assert await found(store, "UserProfile") == [hit]
    assert await found(store, "serprof") == [hit]
    [result] = await store.search("userprofile", ALL)
    assert [t for t, match in snippet_parts(result.snippet) if match] == ["UserProfile"]


async def test_whole_words_rank_before_substrings(store: Store) -> None:
    sid = await new_session(store)
    inside = await add(store, sid, "see getProfileName for details")
    word = await add(store, sid, "the profile page is broken")
    assert await found(store, "profile") == [word, inside]
    assert await found(store, "profile", sort="recent") == [word, inside]


async def test_an_exclusion_applies_to_substring_hits_too(store: Store) -> None:
    sid = await new_session(store)
    keep = await add(store, sid, "call fetchUserData now")
    await add(store, sid, "call fetchUserData later")
    assert await found(store, "userdata -later") == [keep]
    assert await found(store, "userdata -lat") == [keep]


async def test_a_short_term_is_a_word_even_beside_a_substring(store: Store) -> None:
    sid = await new_session(store)
    hit = await add(store, sid, "go use parseConfigFile")
    await add(store, sid, "good parseConfigFile")
    assert await found(store, "go configfile") == [hit]


@pytest.mark.parametrize("query", ["数据库", "カタカナ", "userprofile"])
async def test_cjk_and_substring_hits_are_found_in_archived_rows(store: Store, query: str) -> None:
    sid = await new_session(store)
    text = {"数据库": "讨论数据库设计", "カタカナ": "これはカタカナです", "userprofile": "getUserProfile()"}[
        query
    ]
    hit = await add(store, sid, text)
    await add(store, sid, "tail")
    [first, _] = await store.load_active(sid)
    await store.archive_and_summarize(sid, summary_plan([first], "summary"))
    assert await found(store, query) == [hit]
    assert await store.search(query, SearchFilters(state="active")) == []


async def test_an_edit_reindexes_the_cjk_characters(store: Store) -> None:
    sid = await new_session(store)
    message = await store.append_message(sid, ChatMessage.user("我们讨论天气", platform_message_id="p1"))
    await store.record_edit(
        sid,
        "p1",
        [{"type": "text", "text": "我们讨论数据库"}],
        at=message.created_at,  # type: ignore[arg-type]
    )
    assert await found(store, "数据") == [message.id]
    assert await found(store, "天气") == []


async def test_every_message_holding_the_query_is_found_in_a_mixed_corpus(store: Store) -> None:
    sid = await new_session(store)
    texts = mixed_messages(300)
    ids = [await add(store, sid, text) for text in texts]
    for query in QUERIES:
        hits = {h.message_id for h in await store.search(query, ALL, limit=1000)}
        assert hits == {ids[i] for i in expected(texts, query)}, query
