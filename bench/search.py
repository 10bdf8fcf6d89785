"""Search latency by query class: admin search over every message, and ``session_search`` inside
one session holding most of them (archived). SQLite always; PostgreSQL too when
HYGIEIA_TEST_POSTGRES_URL is set. Prints p50/p95 per class, engine and order.

    python bench/search.py [--full] [--keep] [--runs N]

Default corpus: 112,000 messages; ``--full``: 1,120,000 (one session holds 1,008,000 archived
rows; 90% of all rows are archived). ``--keep`` keeps the corpus (.hygieia/bench/ and schema
``bench_search_<size>_<revision>`` on PostgreSQL) and reuses it next time: building the full one takes
minutes. The rows are bulk-loaded through the schema the migrations build (see
``bench/_search_corpus.py``); the queries run through the real store.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _search_corpus as corpus_mod
from _report import Report
from rich.console import Console
from rich.table import Table
from sqlalchemy import text
from sqlalchemy.engine import make_url

from agent.types import SearchFilters
from gateway.store.db import Database
from gateway.store.migrate import head_revision, upgrade_to_head
from gateway.store.repository import Store

try:  # the collector as the service runs it (absent from older checkouts: Python's defaults)
    from gateway.runner.run import tune_gc
except ImportError:  # pragma: no cover

    def tune_gc() -> None:
        pass


try:  # absent before migration 0003 (the bench also measures older code for a before/after)
    from gateway.store.search_index import cjk_index_text as CJK
except ImportError:  # pragma: no cover
    CJK = None  # type: ignore[assignment]

SIZES = {"default": 112_000, "full": 1_120_000}
console = Console(width=150)


@dataclass(frozen=True)
class QueryClass:
    name: str
    queries: tuple[str, ...]


def query_classes(c: corpus_mod.Corpus) -> list[QueryClass]:
    common, medium, rare = c.word_near(0.25), c.word_near(0.01), c.word_near(0.00005)
    other = c.word_near(0.05)
    long_common = min((w for w in c.vocab if len(w) >= 6), key=lambda w: abs(c.df[w] / c.size - 0.2))
    return [
        QueryClass("rare word", (rare, c.word_near(0.0001))),
        QueryClass("medium word", (medium, c.word_near(0.02))),
        QueryClass("common word", (common, c.word_near(0.3))),
        QueryClass("two words", (f"{medium} {common}", f"{other} {medium}")),
        QueryClass("phrase", (f'"{c.phrase}"',)),
        QueryClass("prefix*", (medium[:3] + "*", common[:4] + "*")),
        QueryClass("exclusion", (f"{common} -{medium}",)),
        QueryClass("CJK word", ("数据", "カタカナ", "서버")),
        QueryClass("identifier part", ("UserProfile", "ConfigFile")),
        QueryClass("no match", ("zzqxjw",)),
        # Beyond the first classes: a four-letter prefix of a common word (no prefix index that
        # long: over the floor, docs/measured.md), and a common word mistyped (the substring tier).
        QueryClass("long prefix* of a common word", (f"{long_common[:4]}*",)),
        QueryClass("a common word mistyped", (mistyped(long_common),)),
    ]


def mistyped(word: str) -> str:
    """``word`` with its fourth and fifth letters swapped, as a user's slip would have it."""
    return word[:3] + word[4] + word[3] + word[5:]


Search = Callable[[str], Awaitable[Any]]


async def timed(search: Search, queries: tuple[str, ...], runs: int) -> list[float]:
    samples: list[float] = []
    for query in queries:
        await search(query)  # warm the cache and the plan
        for _ in range(runs):
            started = time.perf_counter()
            await search(query)
            samples.append((time.perf_counter() - started) * 1000)
    return samples


KEEP_DIR = Path(".hygieia/bench")


def kept_name(size: int) -> str:
    """The name of a kept corpus (``--keep``): per size and schema revision, so an older
    checkout measuring itself never reuses ours."""
    return f"search_{size}_{(head_revision() or 'none')[:4]}"


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


async def build(url: str, c: corpus_mod.Corpus, load: Callable[[], None], keep: bool) -> float:
    """Migrate and load unless a kept corpus is already there; the seconds it took (0 when reused)."""
    if keep and await _complete(url, c.size):
        for _ in c.texts():  # the word counts the query classes are chosen from
            pass
        return 0.0
    started = time.perf_counter()
    await upgrade_to_head(url)
    await asyncio.to_thread(load)
    return time.perf_counter() - started


async def _complete(url: str, size: int) -> bool:
    try:
        async with Database(url) as db, db.engine.connect() as conn:
            revision = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
            count = (await conn.execute(text("SELECT count(*) FROM messages"))).scalar()
    except Exception:  # a missing or half-built corpus: build it again
        return False
    return revision == head_revision() and count == size


async def measure(name: str, url: str, c: corpus_mod.Corpus, runs: int, table: Table, report: Report) -> None:
    sorts: tuple[str, ...] = ("relevance", "recent")
    async with Database(url) as db:
        store = Store(db)
        accepts_sort = "sort" in inspect.signature(store.search).parameters
        for cls in query_classes(c):
            for sort in sorts if accepts_sort else ("relevance",):
                kw: dict[str, Any] = {"sort": sort} if accepts_sort else {}
                cases = {
                    "admin": lambda q, kw=kw: store.search(q, SearchFilters(), limit=20, **kw),
                    "session": lambda q, kw=kw: store.search(
                        q, SearchFilters(session_id=corpus_mod.BIG_SESSION), limit=10, **kw
                    ),
                }
                hits = len(await cases["admin"](cls.queries[0]))
                row = [name, cls.name, sort, str(hits)]
                for case, search in cases.items():
                    samples = await timed(search, cls.queries, runs)
                    row += [f"{statistics.median(samples):.1f}", f"{p95(samples):.1f}"]
                    report.add(f"{name}/{case}/{cls.name}/{sort}/p50", statistics.median(samples))
                    report.add(f"{name}/{case}/{cls.name}/{sort}/p95", p95(samples))
                table.add_row(*row)


def _progress(total: int, label: str) -> Callable[..., None]:
    done = [0]
    started = time.perf_counter()

    def step(count: int, note: str = "") -> None:
        done[0] += count
        if note:
            print(f"  {label}: {note}", file=sys.stderr)
        elif done[0] % 200_000 < count or done[0] == total:
            print(
                f"  {label}: {done[0]:,}/{total:,} rows, {time.perf_counter() - started:.0f} s",
                file=sys.stderr,
            )

    return step


async def main(full: bool, keep: bool, runs: int, size: int | None) -> None:
    size = size or SIZES["full" if full else "default"]
    c = corpus_mod.Corpus(size)
    report = Report("search", full=full)
    report.note("messages", size)
    table = Table(title=f"Search latency, {size:,} messages (90% archived), {runs} runs per query (ms)")
    for column in ("db", "class", "order", "hits", "admin p50", "admin p95", "session p50", "session p95"):
        table.add_column(column, justify="left" if column in ("db", "class", "order") else "right")
    targets: list[tuple[str, str, Callable[[], None], Callable[[], Awaitable[None]] | None]] = []
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"hygieia-bench-{uuid.uuid4().hex[:8]}"
    kept = kept_name(size)
    sqlite_path = (KEEP_DIR if keep else tmp) / f"{kept}.db"
    await asyncio.to_thread(sqlite_path.parent.mkdir, parents=True, exist_ok=True)
    sqlite_url = f"sqlite+aiosqlite:///{sqlite_path}"
    targets.append(
        (
            "sqlite",
            sqlite_url,
            lambda: corpus_mod.load_sqlite(str(sqlite_path), c, CJK, _progress(size, "sqlite")),
            None,
        )
    )
    pg = os.environ.get("HYGIEIA_TEST_POSTGRES_URL")
    if pg:
        schema = f"bench_{kept}" if keep else f"bench_search_{uuid.uuid4().hex[:8]}"
        dsn = make_url(pg).set(drivername="postgresql").render_as_string(hide_password=False)
        pg_url = make_url(pg).update_query_dict({"options": f"-csearch_path={schema}"})
        targets.append(
            (
                "postgresql",
                pg_url.render_as_string(hide_password=False),
                lambda: corpus_mod.load_postgres(dsn, schema, c, CJK, _progress(size, "postgresql")),
                None if keep else lambda: _drop_schema(dsn, schema),
            )
        )
        await _create_schema(dsn, schema)
    try:
        for name, url, load, _ in targets:
            seconds = await build(url, c, load, keep)
            report.note(f"{name} build seconds", round(seconds))
            print(f"{name}: corpus ready ({seconds:.0f} s to build)", file=sys.stderr)
            # As `hygieia run` does after start-up: without it, collections over the objects the
            # corpus build left behind put 50-60 ms pauses into the samples.
            tune_gc()
            await measure(name, url, c, runs, table, report)
    finally:
        for _, _, _, cleanup in targets:
            if cleanup is not None:
                await cleanup()
        if not keep:
            await asyncio.to_thread(_remove, sqlite_path)
    console.print(table)
    print("admin: store.search over every message, limit 20; session: inside the big session, limit 10.")
    report.save()


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.parent.rmdir()


async def _create_schema(dsn: str, schema: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')


async def _drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="1,120,000 messages instead of 112,000")
    parser.add_argument("--keep", action="store_true", help="keep the corpus and reuse it next time")
    parser.add_argument("--runs", type=int, default=10, help="timed runs per query (default 10)")
    parser.add_argument("--size", type=int, help="messages in the corpus (overrides --full)")
    args = parser.parse_args()
    asyncio.run(main(args.full, args.keep, args.runs, args.size))
