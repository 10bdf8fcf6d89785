"""What the search index covers: a bounded prefix of every message, which is stored whole."""

from __future__ import annotations

import importlib
import re
import unicodedata

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text

from agent.types import ChatMessage, SearchFilters
from gateway.store import search_index
from gateway.store.repository import Store
from gateway.store.search_index import INDEX_CHARS, cjk_index_text
from tests.store.helpers import new_session

ALL = SearchFilters()


def _long_text(chars: int) -> str:
    """Distinct words (the worst case for a tsvector), ``chars`` characters in all."""
    words, size, i = [], 0, 0
    while size < chars:
        word = f"w{i:07d}"
        words.append(word)
        size += len(word) + 1
        i += 1
    return " ".join(words)[:chars]


async def test_a_message_over_a_megabyte_is_stored_whole_and_its_prefix_is_searchable(store: Store) -> None:
    sid = await new_session(store)
    body = "kilimanjaro " + _long_text(1_300_000) + " zanzibar"
    stored = await store.append_message(sid, ChatMessage.user(body))

    [loaded] = await store.load_active(sid)
    assert loaded.text == body and stored.id == loaded.id
    assert [h.message_id for h in await store.search("kilimanjaro", ALL)] == [stored.id]


async def test_words_past_the_indexed_prefix_are_not_found(store: Store) -> None:
    sid = await new_session(store)
    filler = _long_text(INDEX_CHARS + 10)
    await store.append_message(sid, ChatMessage.user(filler[: INDEX_CHARS - 9] + " inside"))
    await store.append_message(sid, ChatMessage.user(filler + " outside"))
    assert len(await store.search("inside", ALL)) == 1
    assert await store.search("outside", ALL) == []


def test_the_migration_indexes_the_same_prefix_the_store_documents() -> None:
    migration = importlib.import_module("migrations.versions.0003_search_index")
    assert migration.INDEX_CHARS == INDEX_CHARS


async def test_a_missing_substring_index_is_reported_in_one_line(store: Store) -> None:
    assert await store.search_index_problem() is None
    if store.db.dialect != "postgresql":
        return
    async with store.db.transaction() as s:
        await s.execute(text("DROP INDEX ix_messages_text_trgm"))
    problem = await store.search_index_problem()
    assert problem is not None and "CREATE EXTENSION pg_trgm" in problem and "\n" not in problem
    sid = await new_session(store)
    hit = await store.append_message(sid, ChatMessage.user("getUserProfileById()"))
    assert [h.message_id for h in await store.search("UserProfile", ALL)] == [hit.id]


def _cjk_by_scan(text_: str) -> str | None:
    """``cjk_index_text`` without its shortcut for ASCII text: every text normalized and scanned."""
    prefix = unicodedata.normalize("NFC", text_[:INDEX_CHARS])
    tokens: list[str] = []
    for run in re.findall(f"[{search_index._CJK_CLASS}]+", prefix):
        tokens += [search_index.CJK_RUN_SEPARATOR, *run]
    return " ".join(tokens[: search_index.CJK_INDEX_TOKENS]) if tokens else None


@given(
    st.text(
        alphabet=st.sampled_from("ab 1.-\u00e9\u0301\u6570\u636e\u30ab\uc11c\u3000\U00020000"), max_size=40
    )
)
def test_the_cjk_column_is_what_a_full_scan_of_the_text_gives(text_: str) -> None:
    assert cjk_index_text(text_) == _cjk_by_scan(text_)


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=60))
def test_ascii_text_has_no_cjk_column(text_: str) -> None:
    assert cjk_index_text(text_) is None
    assert _cjk_by_scan(text_) is None
