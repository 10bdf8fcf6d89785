"""Search recall on a mixed corpus: English with code identifiers, Chinese, Japanese and Korean.

A message must be found when it contains the query (ignoring case): a CJK word inside a
sentence, part of an identifier, a whole word. Prints recall and precision per kind of
query, on SQLite and (with HYGIEIA_TEST_POSTGRES_URL) PostgreSQL. The corpus is the one
``tests/store/test_search_scripts.py`` checks exactly.

    python bench/search_recall.py [--full]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # the checkout: tests.store.search_corpus

from _report import Report
from rich.console import Console
from rich.table import Table
from sqlalchemy import text
from sqlalchemy.engine import make_url

from agent.types import ChatMessage, SearchFilters
from gateway.store.db import Database
from gateway.store.migrate import upgrade_to_head
from gateway.store.repository import Store
from tests.store.search_corpus import QUERIES, expected, mixed_messages

KINDS = {"CJK word": QUERIES[:10], "identifier part": QUERIES[10:17], "whole word": QUERIES[17:]}


async def recall(url: str, texts: list[str]) -> dict[str, tuple[float, float]]:
    await upgrade_to_head(url)
    async with Database(url) as db:
        store = Store(db)
        info = await store.get_or_create_session(
            "bench:recall", platform="bench", chat_id="recall", system_prompt="", model="bench"
        )
        ids = [(await store.append_message(info.id, ChatMessage.user(t))).id for t in texts]
        out: dict[str, tuple[float, float]] = {}
        for kind, queries in KINDS.items():
            wanted = found = right = 0
            for query in queries:
                truth = {ids[i] for i in expected(texts, query)}
                hits = {h.message_id for h in await store.search(query, SearchFilters(), limit=len(texts))}
                wanted, found, right = wanted + len(truth), found + len(hits), right + len(hits & truth)
            out[kind] = (right / wanted if wanted else 1.0, right / found if found else 1.0)
        return out


async def main(full: bool) -> None:
    texts = mixed_messages(20_000 if full else 2_000)
    report = Report("search_recall", full=full)
    table = Table(title=f"Search recall on a mixed-script corpus of {len(texts):,} messages")
    for column in ("database", "queries", "count", "recall", "precision"):
        table.add_column(column, justify="right" if column in ("count", "recall", "precision") else "left")
    with tempfile.TemporaryDirectory() as tmp:
        targets = [("sqlite", f"sqlite+aiosqlite:///{Path(tmp) / 'recall.db'}", None)]
        pg = os.environ.get("HYGIEIA_TEST_POSTGRES_URL")
        if pg:
            schema = f"bench_recall_{uuid.uuid4().hex[:8]}"
            url = make_url(pg).update_query_dict({"options": f"-csearch_path={schema}"})
            targets.append(("postgresql", url.render_as_string(hide_password=False), schema))
        for name, url, schema in targets:
            if schema is not None:
                await _schema(pg or "", f'CREATE SCHEMA "{schema}"')
            try:
                results = await recall(url, texts)
            finally:
                if schema is not None:
                    await _schema(pg or "", f'DROP SCHEMA "{schema}" CASCADE')
            for kind, (r, p) in results.items():
                table.add_row(name, kind, str(len(KINDS[kind])), f"{r:.1%}", f"{p:.1%}")
                report.add(f"{name}/{kind}/recall", r * 100, unit="%", better="higher")
                report.add(f"{name}/{kind}/precision", p * 100, unit="%", better="higher")
    Console(width=120).print(table)
    report.save()


async def _schema(url: str, statement: str) -> None:
    async with Database(url) as db, db.engine.begin() as conn:
        await conn.execute(text(statement))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="20,000 messages instead of 2,000")
    asyncio.run(main(parser.parse_args().full))
