"""bench/_search_corpus.py loads rows the store reads as its own: the benches measure the real schema."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import _search_corpus as corpus_mod

from agent.types import SearchFilters
from gateway.store.db import Database
from gateway.store.migrate import upgrade_to_head
from gateway.store.repository import Store
from gateway.store.search_index import cjk_index_text

SIZE = 3_000


async def test_a_bulk_loaded_corpus_reads_back_and_is_found_through_the_store(tmp_path: Path) -> None:
    path = tmp_path / "corpus.db"
    url = f"sqlite+aiosqlite:///{path}"
    await upgrade_to_head(url)
    corpus = corpus_mod.Corpus(SIZE)
    await asyncio.to_thread(corpus_mod.load_sqlite, str(path), corpus, cjk_index_text, lambda *_: None)
    texts = list(corpus_mod.Corpus(SIZE).texts())
    async with Database(url) as db:
        store = Store(db)
        first = await store.get_message(1)
        assert first.content == [{"type": "text", "text": texts[0]}]
        word = corpus.word_near(0.01)
        hits = await store.search(word, SearchFilters(), limit=5)
        assert hits and all(word in texts[h.message_id - 1].split() for h in hits if not h.substring)
        cjk = await store.search("数据", SearchFilters(), limit=5)
        assert cjk and all("数据" in texts[h.message_id - 1] for h in cjk)
