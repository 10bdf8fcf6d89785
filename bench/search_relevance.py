"""Relevance: how much our top 20 shares with a BM25 ranking over every match, per query class.

    python bench/search_relevance.py [--full] [--keep] [--windows 500,2000]

For each query of ``bench/search.py``'s classes (SQLite, the same corpus), the reference is
FTS5's ``bm25()`` over every words-tier match (with IDF; ``ORDER BY bm25(messages_fts)``),
and we compare with it, as the share of its top 20 found in ours:

- ``ours``: relevance as the store ranks it (the newest ``rank_window`` matches, by our score);
- ``window N``: the same with a window of N matches;
- ``all``: our score over every match (what the window costs, apart from the formula).

Also the matches per query and the p50 latency of each variant. Substring-only hits are left
out (the reference cannot rank them; they follow every word hit in both orders).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from pathlib import Path

import _search_corpus as corpus_mod
from _report import Report
from rich.console import Console
from rich.table import Table
from search import CJK, KEEP_DIR, SIZES, _progress, _remove, build, kept_name, query_classes
from sqlalchemy import Connection, func, select, text

from agent.types import SearchFilters
from gateway.store.db import Database
from gateway.store.repository import Store
from gateway.store.search_query import parse
from gateway.store.search_sql import EVERY_ID, SqliteSearch

TOP = 20
console = Console(width=150)


def reference(conn: Connection, query: str) -> tuple[list[int], int]:
    """FTS5's BM25 top :data:`TOP` over every words-tier match, and how many matches there are."""
    words = SqliteSearch().words(parse(query), SearchFilters(), EVERY_ID, limit=10**9)
    if words is None:
        return [], 0
    stmt, params = words.statement, words.params
    count = conn.execute(
        select(func.count()).select_from(stmt.order_by(None).subquery()), params
    ).scalar_one()
    ranked = stmt.order_by(None).order_by(text("bm25(messages_fts)"), text("messages_fts.rowid DESC"))
    return [int(r[0]) for r in conn.execute(ranked, {**params, "limit": TOP})], int(count)


async def ours(store: Store, query: str, window: int, runs: int) -> tuple[list[int], float]:
    store.rank_window = window
    samples = []
    hits = []
    for _ in range(runs + 1):
        started = time.perf_counter()
        hits = await store.search(query, SearchFilters(), limit=TOP)
        samples.append((time.perf_counter() - started) * 1000)
    return [h.message_id for h in hits if not h.substring], statistics.median(samples[1:])


async def main(full: bool, keep: bool, windows: list[int], runs: int) -> None:
    size = SIZES["full" if full else "default"]
    c = corpus_mod.Corpus(size)
    report = Report("search_relevance", full=full)
    report.note("messages", size)
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"hygieia-bench-{uuid.uuid4().hex[:8]}"
    path = (KEEP_DIR if keep else tmp) / f"{kept_name(size)}.db"
    await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
    url = f"sqlite+aiosqlite:///{path}"
    await build(url, c, lambda: corpus_mod.load_sqlite(str(path), c, CJK, _progress(size, "sqlite")), keep)
    table = Table(title=f"Top-{TOP} agreement with BM25 over every match, {size:,} messages (SQLite)")
    variants = [*(f"window {w}" for w in windows), "all"]
    for column in (
        "class",
        "query",
        "matches",
        *(f"{v} share" for v in variants),
        *(f"{v} ms" for v in variants),
    ):
        table.add_column(column, justify="left" if column in ("class", "query") else "right")
    async with Database(url) as db:
        store = Store(db)
        default = store.rank_window
        for cls in query_classes(c):
            for query in cls.queries:
                ref, count = await db.read_at_once(lambda conn, q=query: reference(conn, q))
                if not ref:
                    continue
                shares, times = [], []
                for window in [*windows, 10**9]:
                    got, ms = await ours(store, query, window, runs)
                    shares.append(len(set(got[:TOP]) & set(ref)) / len(ref))
                    times.append(ms)
                table.add_row(
                    cls.name,
                    query,
                    str(count),
                    *(f"{s:.2f}" for s in shares),
                    *(f"{t:.1f}" for t in times),
                )
                for variant, share, ms in zip(variants, shares, times, strict=True):
                    report.add(f"{cls.name}/{query}/{variant}/share", share, unit="share", better="higher")
                    report.add(f"{cls.name}/{query}/{variant}/p50", ms)
                report.note(f"{cls.name}/{query}/matches", count)
        store.rank_window = default
    if not keep:
        await asyncio.to_thread(_remove, path)
    console.print(table)
    print(f"share: the part of FTS5 bm25()'s top {TOP} (every match ranked) that our top {TOP} holds.")
    report.save()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="1,120,000 messages instead of 112,000")
    parser.add_argument("--keep", action="store_true", help="keep the corpus and reuse it (as search.py)")
    parser.add_argument("--windows", default="500,2000", help="rank windows to compare (default 500,2000)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per query and variant")
    args = parser.parse_args()
    asyncio.run(main(args.full, args.keep, [int(w) for w in args.windows.split(",")], args.runs))
