"""Admin page timings (server time) on a big database: the sessions list, search, a session page.

The corpus is bulk-inserted through the real schema (Alembic-built tables, the FTS triggers on
SQLite, the generated search column on PostgreSQL): sessions on three platforms, each with ~90%
of its messages archived by one compaction whose summary is active, one chat call per assistant
message, the daily usage roll-up filled as the migration fills it. Then each page is requested
in-process (httpx over ASGI, so the time is the app's and the database's, no network) and timed.

    python bench/admin_pages.py            # 100 sessions, 50,000 messages
    python bench/admin_pages.py --full     # 1,000 sessions, 1,000,000 messages

PostgreSQL too when HYGIEIA_TEST_POSTGRES_URL is set (in a schema of its own, dropped after).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table
from sqlalchemy import create_engine, insert, text
from sqlalchemy.engine import Engine, make_url

from gateway.admin.app import create_app
from gateway.store.db import Database
from gateway.store.migrate import upgrade_to_head
from gateway.store.models import compactions, messages, sessions, usage
from gateway.store.repository import Store

TOKEN = "bench-admin-token-0123456789"
WORDS = [f"w{i}" for i in range(5000)] + ["budget", "garden", "invoice", "weather", "deploy", "meeting"]
RARE = "quetzalcoatl"
BATCH = 5000
START = datetime(2026, 6, 1, tzinfo=UTC)


def sentence(rng: random.Random) -> str:
    # Zipf-ish: a few words are everywhere, most are rare.
    return " ".join(
        WORDS[min(int(rng.paretovariate(1.1)) - 1, len(WORDS) - 1)] for _ in range(rng.randint(6, 24))
    )


def sizes(total: int, count: int, rng: random.Random) -> list[int]:
    """Messages per session: skewed (a few big chats), adding up to ``total``; the first is the biggest."""
    weights = sorted((rng.paretovariate(1.5) for _ in range(count)), reverse=True)
    scale = total / sum(weights)
    out = [max(4, int(w * scale)) for w in weights]
    out[0] += total - sum(out)
    return out


def build(engine: Engine, n_sessions: int, n_messages: int, seed: int = 7) -> dict[str, Any]:
    """Bulk-insert the corpus; returns what the timings need (a big and a median session, a hit)."""
    rng = random.Random(seed)
    counts = sizes(n_messages, n_sessions, rng)
    ids = [uuid.uuid4().hex for _ in counts]
    platforms = ("telegram", "discord", "console")
    rows: list[dict[str, Any]] = []
    for i, sid in enumerate(ids):
        platform = platforms[i % 3]
        at = START + timedelta(minutes=i)
        rows.append(
            {
                "id": sid,
                "key": f"{platform}:dm:{1000 + i}",
                "platform": platform,
                "chat_id": str(1000 + i),
                "thread_id": None,
                "user_id": str(1000 + i),
                "system_prompt": "You are helpful.",
                "model": "claude-sonnet-4-6",
                "created_at": at,
                "last_activity_at": at + timedelta(days=i % 90),
                "ended_at": None,
                "end_reason": None,
                "last_prompt_tokens": rng.randint(2000, 150_000),
                "last_prompt_at": at,
                "compaction_count": 1,
                "context_state": None,
                "version": 1,
            }
        )
    hit_id = 0
    with engine.begin() as conn:
        conn.execute(insert(sessions), rows)
        next_id = 1
        batch: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        for i, (sid, count) in enumerate(zip(ids, counts, strict=True)):
            cid = uuid.uuid4().hex
            archived = int(count * 0.9)
            conn.execute(
                insert(compactions),
                [
                    {
                        "id": cid,
                        "session_id": sid,
                        "number": 1,
                        "trigger": "hygiene",
                        "status": "ok",
                        "archived_from_seq": 1,
                        "archived_to_seq": archived,
                        "messages_archived": archived,
                        "first_kept_id": None,
                        "summary_message_id": None,
                        "tokens_before": 150_000,
                        "tokens_after": 20_000,
                        "model": "claude-haiku-4-5",
                        "duration_ms": 900,
                        "focus": None,
                        "created_at": START,
                        "restored_at": None,
                    }
                ],
            )
            for seq in range(1, count + 1):
                role = "user" if seq % 2 else "assistant"
                body = sentence(rng) + (f" {RARE}" if seq == 3 and i == len(ids) // 2 else "")
                if seq == 3 and i == len(ids) // 2:
                    hit_id = next_id
                at = START + timedelta(days=i % 90, seconds=seq * 30)
                arch = seq <= archived
                batch.append(
                    {
                        "id": next_id,
                        "session_id": sid,
                        "seq": seq,
                        "sub_seq": 0,
                        "role": role,
                        "content": [{"type": "text", "text": body}],
                        "text": body,
                        "kind": "message",
                        "author_id": str(1000 + i) if role == "user" else None,
                        "author_name": "user" if role == "user" else None,
                        "platform_message_id": None,
                        "token_estimate": len(body) // 4,
                        "created_at": at,
                        "active": not arch,
                        "compacted": arch,
                        "compaction_id": cid if arch else None,
                        "produced_by": None,
                    }
                )
                next_id += 1
                if role == "assistant":
                    calls.append(
                        {
                            "session_id": sid,
                            "model": "claude-sonnet-4-6",
                            "purpose": "chat",
                            "input_tokens": 300,
                            "cache_write_tokens": 1000 if seq % 20 == 2 else 0,
                            "cache_read_tokens": rng.randint(2000, 90_000),
                            "output_tokens": 200,
                            "cost_usd": 0.01,
                            "estimated": False,
                            "created_at": at,
                        }
                    )
                if seq == archived:  # the summary sits where the archive was
                    summary = f"## Goal\n- {sentence(rng)}"
                    batch.append(
                        {
                            **batch[-1],
                            "id": next_id,
                            "seq": 1,
                            "sub_seq": 1,
                            "role": "user",
                            "kind": "summary",
                            "content": [{"type": "text", "text": summary}],
                            "text": summary,
                            "active": True,
                            "compacted": False,
                            "compaction_id": None,
                            "produced_by": cid,
                            "author_id": None,
                        }
                    )
                    next_id += 1
                if len(batch) >= BATCH:
                    conn.execute(insert(messages), batch)
                    batch = []
                if len(calls) >= BATCH:
                    conn.execute(insert(usage), calls)
                    calls = []
        for rest, table in ((batch, messages), (calls, usage)):
            if rest:
                conn.execute(insert(table), rest)
        day = (
            "substr(created_at, 1, 10)"
            if engine.dialect.name == "sqlite"
            else ("to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')")
        )
        conn.execute(
            text(
                "INSERT INTO usage_daily (session_id, day, calls, input_tokens, cache_write_tokens, "
                "cache_read_tokens, output_tokens, cost_usd) "
                f"SELECT session_id, {day}, count(*), sum(input_tokens), sum(cache_write_tokens), "
                "sum(cache_read_tokens), sum(output_tokens), sum(cost_usd) "
                f"FROM usage GROUP BY session_id, {day}"
            )
        )
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT setval(pg_get_serial_sequence('messages', 'id'), :n)"), {"n": next_id})
        else:
            conn.execute(text("ANALYZE"))
    if engine.dialect.name == "postgresql":
        # What autovacuum does on a live database: statistics, and the visibility map that lets
        # the counts run on the index alone.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))
    median = ids[len(ids) // 2]
    return {
        "big": ids[0],
        "big_size": counts[0],
        "median": median,
        "median_size": counts[len(ids) // 2],
        "hit": hit_id,
    }


async def timed(client: httpx.AsyncClient, url: str, rounds: int) -> list[float]:
    await client.get(url)  # warm: the first request pays for imports and the plan cache
    out = []
    for _ in range(rounds):
        started = time.perf_counter()
        response = await client.get(url)
        out.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code, response.text[:200])
    return out


async def measure(url: str, corpus: dict[str, Any], rounds: int) -> list[tuple[str, list[float]]]:
    db = Database(url)
    await db.connect()
    try:
        app = create_app(Store(db), token=TOKEN)
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://bench", headers=headers) as client:
            pages = [
                ("sessions list (latest activity)", "/"),
                ("sessions list sorted by cost", "/?sort=cost"),
                ("sessions list, key filter", "/?key=dm%3A15"),
                ("search, a rare word", f"/search?q={RARE}"),
                ("search, a common word", "/search?q=w0"),
                (f"session page, biggest ({corpus['big_size']:,} msgs)", f"/sessions/{corpus['big']}"),
                (f"session page, median ({corpus['median_size']:,} msgs)", f"/sessions/{corpus['median']}"),
                ("session page at a search hit", f"/sessions/{corpus['median']}?message={corpus['hit']}"),
                ("usage overview", "/usage"),
                ("/api/sessions?sort=size", "/api/sessions?sort=size"),
            ]
            return [(name, await timed(client, path, rounds)) for name, path in pages]
    finally:
        await db.dispose()


def sync_url(url: str) -> str:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        parsed = parsed.set(drivername="sqlite")
    return parsed.render_as_string(hide_password=False)


async def run_engine(
    name: str, url: str, n_sessions: int, n_messages: int, rounds: int
) -> tuple[str, list[Any]]:
    await upgrade_to_head(url)
    engine = create_engine(sync_url(url))
    started = time.perf_counter()
    corpus = await asyncio.to_thread(build, engine, n_sessions, n_messages)
    engine.dispose()
    took = time.perf_counter() - started
    print(f"{name}: corpus of {n_sessions:,} sessions / {n_messages:,} messages built in {took:.0f} s")
    return name, await measure(url, corpus, rounds)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="1,000 sessions and 1,000,000 messages")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    n_sessions, n_messages = (1000, 1_000_000) if args.full else (100, 50_000)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        results.append(
            await run_engine(
                "SQLite", f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}", n_sessions, n_messages, args.rounds
            )
        )
        pg = os.environ.get("HYGIEIA_TEST_POSTGRES_URL")
        if pg:
            schema = f"bench_{uuid.uuid4().hex[:12]}"
            admin = create_engine(pg)
            with admin.begin() as conn:
                conn.execute(text(f'CREATE SCHEMA "{schema}"'))
            try:
                url = make_url(pg).update_query_dict({"options": f"-csearch_path={schema}"})
                results.append(
                    await run_engine(
                        "PostgreSQL",
                        url.render_as_string(hide_password=False),
                        n_sessions,
                        n_messages,
                        args.rounds,
                    )
                )
            finally:
                with admin.begin() as conn:
                    conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
                admin.dispose()
    table = Table(title=f"admin pages, server time in ms ({n_sessions:,} sessions, {n_messages:,} messages)")
    table.add_column("page")
    for name, _ in results:
        table.add_column(f"{name} p50", justify="right")
        table.add_column(f"{name} p95", justify="right")
    for row, (page, _) in enumerate(results[0][1]):
        cells = [page]
        for _, timings in results:
            samples = sorted(timings[row][1])
            cells += [f"{statistics.median(samples):.1f}", f"{samples[int(len(samples) * 0.95) - 1]:.1f}"]
        table.add_row(*cells)
    Console(width=150).print(table)


if __name__ == "__main__":
    asyncio.run(main())
