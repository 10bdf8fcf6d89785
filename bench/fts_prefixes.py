"""What the words index's prefix indexes cost in a bulk load, and what they buy in search (SQLite).

``messages_fts`` keeps prefix indexes for 2 and 3 characters (migration 0014). For each setting
(``prefix='2 3'``, the schema's; ``'3'``; none) this rebuilds the index over the search bench's
corpus and reports the rebuild's CPU seconds and the index's size, then times searches of
``prefix*`` queries of 2, 3 and 4 characters through the store (both orders, p50 and p95).
The corpus is the one ``bench/search.py --keep`` keeps (copied, never changed), else built here.

    python bench/fts_prefixes.py [--full] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import _search_corpus as corpus_mod
from _report import Report
from rich.console import Console
from rich.table import Table
from search import KEEP_DIR, SIZES, kept_name, p95

from agent.types import SearchFilters
from gateway.store.db import Database
from gateway.store.migrate import upgrade_to_head
from gateway.store.repository import Store
from gateway.store.search_index import cjk_index_text

SETTINGS = ("2 3", "3", "")
MB = 1_000_000


def corpus_file(folder: Path, c: corpus_mod.Corpus) -> Path:
    """A copy of the kept corpus of ``bench/search.py`` when there is one, else a new load."""
    path = folder / "prefixes.db"
    kept = KEEP_DIR / f"{kept_name(c.size)}.db"
    if kept.exists():
        shutil.copyfile(kept, path)
        for _ in c.texts():  # the word counts the queries are chosen from
            pass
        return path
    asyncio.run(upgrade_to_head(f"sqlite+aiosqlite:///{path}"))
    corpus_mod.load_sqlite(str(path), c, cjk_index_text, lambda *_, **__: None)
    return path


def rebuild(path: Path, setting: str) -> tuple[float, float]:
    """``messages_fts`` made again with ``prefix=setting``; its rebuild's CPU seconds and MB."""
    conn = sqlite3.connect(path, isolation_level=None)
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'messages_fts'").fetchone()[0]
    sql = re.sub(r",\s*prefix='[^']*'", "", sql)
    if setting:
        sql = f"{sql[:-1]}, prefix='{setting}')"
    conn.execute("DROP TABLE messages_fts")
    conn.execute(sql)
    cpu = time.process_time()
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')")
    cpu = time.process_time() - cpu
    words_only = "name LIKE 'messages_fts%' AND name NOT LIKE 'messages_fts_trgm%'"
    size = conn.execute(f"SELECT sum(pgsize) FROM dbstat WHERE {words_only}").fetchone()[0]
    conn.close()
    return cpu, size / MB


async def searches(path: Path, queries: list[str], runs: int) -> dict[tuple[str, str], list[float]]:
    """Milliseconds of each query through the store's search, per order."""
    out: dict[tuple[str, str], list[float]] = {}
    async with Database(f"sqlite+aiosqlite:///{path}") as db:
        store = Store(db)
        for query in queries:
            for sort in ("relevance", "recent"):
                await store.search(query, SearchFilters(), limit=20, sort=sort)  # warm
                samples = []
                for _ in range(runs):
                    started = time.perf_counter()
                    await store.search(query, SearchFilters(), limit=20, sort=sort)
                    samples.append((time.perf_counter() - started) * 1000)
                out[(query, sort)] = samples
    return out


def long_word_near(c: corpus_mod.Corpus, share: float) -> str:
    """The word of five letters or more whose share of messages is closest to ``share``."""
    return min((w for w in c.vocab if len(w) >= 5), key=lambda w: abs(c.df[w] / c.size - share))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="1,120,000 messages instead of 112,000")
    parser.add_argument("--runs", type=int, default=10, help="timed runs per query and order")
    args = parser.parse_args()
    c = corpus_mod.Corpus(SIZES["full" if args.full else "default"])
    report = Report("fts_prefixes", full=args.full)
    report.note("messages", c.size)
    with tempfile.TemporaryDirectory(prefix="hygieia-prefixes-") as tmp:
        path = corpus_file(Path(tmp), c)
        common, medium = long_word_near(c, 0.2), long_word_near(c, 0.01)
        queries = [f"{common[:2]}*", f"{common[:3]}*", f"{common[:4]}*", f"{medium[:2]}*", f"{medium[:3]}*"]
        title = f"Words index prefixes, {c.size:,} messages: rebuild, size, prefix search p50 / p95 ms"
        table = Table(title=title)
        for column in ("prefix=", "rebuild CPU s", "index MB", *queries):
            table.add_column(column, justify="right")
        for setting in SETTINGS:
            cpu, size = rebuild(path, setting)
            timings = asyncio.run(searches(path, queries, args.runs))
            name = setting.replace(" ", ",") or "none"
            report.add(f"{name}/rebuild CPU s", cpu, unit="s")
            report.add(f"{name}/index MB", size, unit="MB")
            cells = []
            for query in queries:
                worst = max(p95(timings[(query, sort)]) for sort in ("relevance", "recent"))
                p50 = statistics.median(timings[(query, "relevance")])
                report.add(f"{name}/{query}/relevance p50", p50)
                report.add(f"{name}/{query}/worst p95", worst)
                cells.append(f"{p50:.1f} / {worst:.1f}")
            table.add_row(repr(setting), f"{cpu:.1f}", f"{size:.0f}", *cells)
    load = os.getloadavg()
    report.note("loadavg", [round(x, 2) for x in load])
    report.save()
    Console(width=160).print(table)
    print(f"p50 by relevance / worst p95 of both orders; load average {' '.join(f'{x:.2f}' for x in load)}")


if __name__ == "__main__":
    main()
