"""The search bench's corpus: chat-like messages, most archived, bulk-loaded through the real schema.

One big session holds 90% of the rows (archived, but for its newest 1,000:
``session_search`` runs in it), interleaved in time with 200 smaller sessions that hold the
rest (active): 90% of all rows are archived. Words follow a Zipf law over a pronounceable
vocabulary; some messages carry a fixed phrase, CJK sentences or code identifiers, so
that every query class has hits. The schema comes from the migrations; rows go in with
``executemany`` (SQLite) or ``COPY`` (PostgreSQL) with the search indexes dropped and
rebuilt after (their own definitions, read back from the database), which is how a bulk
load is done and leaves exactly the schema the service uses.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

SYLLABLES = [a + b for a in "bdfgklmnprstvz" for b in ("a", "e", "i", "o", "u", "ai", "ou")]
CJK_SENTENCES = [
    "我们今天讨论数据库的设计问题",
    "服务器部署以后日志里有错误",
    "用户配置已经更新了",
    "これはカタカナのテストです",
    "サーバーの設定を確認してください",
    "데이터베이스 서버에서 오류가 발생했습니다",
]
VERBS = ["get", "set", "fetch", "load", "parse", "render", "update", "build", "handle", "check"]
NOUNS = [
    "User",
    "Profile",
    "Order",
    "Item",
    "Config",
    "File",
    "Request",
    "Session",
    "Cache",
    "Token",
    "Event",
]
BIG_SESSION = "b" * 32
BIG_SHARE = 0.9
ACTIVE_IN_BIG = 1_000
OTHER_SESSIONS = 200
PHRASE_SHARE = 0.01
CJK_SHARE = 0.03
IDENT_SHARE = 0.03


def vocabulary(size: int, rng: random.Random) -> list[str]:
    words: dict[str, None] = {}
    while len(words) < size:
        words["".join(rng.choices(SYLLABLES, k=rng.choice((1, 2, 2, 3, 3, 4))))] = None
    return list(words)


@dataclass
class Corpus:
    """What was generated, and how often each word occurs (messages holding it)."""

    size: int
    seed: int = 11
    vocab: list[str] = field(default_factory=list)
    df: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        self.vocab = vocabulary(20_000, rng)
        self._cum = list(itertools.accumulate(1 / (i + 1) ** 1.1 for i in range(len(self.vocab))))
        self.phrase = f"{self.vocab[3]} {self.vocab[5]}"

    def texts(self) -> Iterator[str]:
        rng = random.Random(self.seed + 1)
        vocab, cum = self.vocab, self._cum
        for _ in range(self.size):
            n = rng.randint(4, 28) if rng.random() > 0.01 else rng.randint(150, 400)
            words = rng.choices(vocab, cum_weights=cum, k=n)
            roll = rng.random()
            if roll < PHRASE_SHARE:
                words.insert(rng.randrange(n), self.phrase)
            elif roll < PHRASE_SHARE + IDENT_SHARE:
                ident = rng.choice(VERBS) + rng.choice(NOUNS) + rng.choice(NOUNS) + "()"
                words.insert(rng.randrange(n), ident)
            elif roll < PHRASE_SHARE + IDENT_SHARE + CJK_SHARE:
                words = [rng.choice(CJK_SENTENCES), *words[:3]]
            self.df.update(set(words))
            yield " ".join(words)

    def word_near(self, share: float) -> str:
        """The vocabulary word whose share of messages is closest to ``share``."""
        return min(self.vocab, key=lambda w: abs(self.df[w] / self.size - share))


@dataclass(frozen=True)
class Row:
    session_id: str
    seq: int
    text: str
    archived: bool
    compaction_id: str | None


def rows(corpus: Corpus) -> Iterator[Row]:
    """Every message row, oldest first: the big session's interleaved with the others' (90/10).

    The big session's rows are archived but for its newest :data:`ACTIVE_IN_BIG`; the other
    sessions' rows are active.
    """
    rng = random.Random(corpus.seed + 2)
    texts = corpus.texts()
    big_total = int(corpus.size * BIG_SHARE)
    big_seq, other_seq = 0, [0] * OTHER_SESSIONS
    other_total = corpus.size - big_total
    other_done = 0
    for _ in range(corpus.size):
        left_big, left_other = big_total - big_seq, other_total - other_done
        if left_big and (not left_other or rng.random() < left_big / (left_big + left_other)):
            big_seq += 1
            archived = big_seq <= big_total - ACTIVE_IN_BIG
            cid = f"c{(big_seq - 1) // 10_000:031d}" if archived else None
            yield Row(BIG_SESSION, big_seq, next(texts), archived, cid)
        else:
            s = rng.randrange(OTHER_SESSIONS)
            other_seq[s] += 1
            other_done += 1
            yield Row(f"s{s:031d}", other_seq[s], next(texts), False, None)


def sessions() -> list[str]:
    return [BIG_SESSION, *(f"s{i:031d}" for i in range(OTHER_SESSIONS))]


def compactions(corpus: Corpus) -> list[str]:
    return [f"c{i:031d}" for i in range((int(corpus.size * BIG_SHARE) + 9_999) // 10_000)]


START = datetime(2025, 1, 1, tzinfo=UTC)


def session_values(sid: str) -> dict[str, Any]:
    return {
        "id": sid,
        "key": f"bench:{sid}",
        "platform": "bench",
        "chat_id": sid,
        "system_prompt": "bench",
        "model": "bench",
        "created_at": START,
        "last_activity_at": START,
        "compaction_count": 0,
        "version": 1,
    }


def compaction_values(cid: str) -> dict[str, Any]:
    return {
        "id": cid,
        "session_id": BIG_SESSION,
        "number": int(cid[1:]) + 1,
        "trigger": "scheduled",
        "status": "ok",
        "messages_archived": 10_000,
        "tokens_before": 100_000,
        "tokens_after": 10_000,
        "model": "bench",
        "duration_ms": 1,
        "created_at": START,
    }


MESSAGE_COLUMNS = (
    "session_id", "seq", "sub_seq", "role", "content", "text", "kind", "created_at", "active", "compacted",
    "compaction_id",
)  # fmt: skip
_NAIVE_START = START.replace(tzinfo=None)


def message_rows(corpus: Corpus, cjk: Any, stamp: Callable[[int], Any]) -> Iterator[tuple[Any, ...]]:
    """Every message row, oldest first, as a tuple in :data:`MESSAGE_COLUMNS` order (then
    ``search_cjk`` when ``cjk`` computes it; None: an older schema without the column);
    ``stamp(index)``: its ``created_at`` as the driver takes it. Each is one plain text block,
    which the service stores in ``text`` alone (``content`` NULL)."""
    for index, row in enumerate(rows(corpus)):
        values = (
            row.session_id,
            row.seq,
            0,
            "user" if index % 2 == 0 else "assistant",
            None,
            row.text,
            "message",
            stamp(index),
            not row.archived,
            row.archived,
            row.compaction_id,
        )
        yield values if cjk is None else (*values, cjk(row.text))


Write = Callable[[str, tuple[str, ...], list[tuple[Any, ...]]], None]


def write_corpus(write: Write, corpus: Corpus, cjk: Any, progress: Any, stamp: Callable[[int], Any]) -> None:
    """Every row of ``corpus`` through ``write(table, columns, rows)``, messages in batches."""
    for table, values in (
        ("sessions", [session_values(s) for s in sessions()]),
        ("compactions", [compaction_values(c) for c in compactions(corpus)]),
    ):
        write(table, tuple(values[0]), [tuple(v.values()) for v in values])
    columns = MESSAGE_COLUMNS if cjk is None else (*MESSAGE_COLUMNS, "search_cjk")
    batch: list[tuple[Any, ...]] = []
    for values in message_rows(corpus, cjk, stamp):
        batch.append(values)
        if len(batch) == 20_000:
            write("messages", columns, batch)
            progress(len(batch))
            batch = []
    write("messages", columns, batch)
    progress(len(batch))


def _sqlite_stamp(index: int) -> str:
    # As SQLAlchemy stores a datetime on SQLite: naive UTC, microseconds.
    return (_NAIVE_START + timedelta(seconds=index)).isoformat(sep=" ", timespec="microseconds")


def load_sqlite(
    path: str, corpus: Corpus, cjk: Any, progress: Any, phases: dict[str, float] | None = None
) -> None:
    """Bulk-load ``corpus`` into the migrated SQLite database at ``path``; ``phases`` gets the
    CPU seconds of each step (the rows, each FTS table, the commit and ``ANALYZE``)."""
    spent = Phases(phases)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = OFF")
    triggers = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'messages'"
    ).fetchall()
    fts = [
        r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'")
    ]
    conn.execute("BEGIN")
    for name, _ in triggers:
        conn.execute(f"DROP TRIGGER {name}")
    write_corpus(lambda *args: _insert_many(conn, *args), corpus, cjk, progress, _sqlite_stamp)
    spent.done("rows (made and inserted)")
    for name in fts:
        conn.execute(f"INSERT INTO {name}({name}) VALUES ('rebuild')")
        spent.done(name)
    for _, sql in triggers:
        conn.execute(sql)
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.close()
    spent.done("commit, ANALYZE, close")


class Phases:
    """CPU seconds per step of a load, into ``into`` (nothing when it is None)."""

    def __init__(self, into: dict[str, float] | None) -> None:
        self._into = into
        self._last = time.process_time()

    def done(self, name: str) -> None:
        now = time.process_time()
        if self._into is not None:
            self._into[name] = now - self._last
        self._last = now


def _insert_many(
    conn: sqlite3.Connection, table: str, columns: tuple[str, ...], values: list[tuple[Any, ...]]
) -> None:
    if not values:
        return
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    conn.executemany(sql, [tuple(map(_sqlite_value, v)) for v in values] if table != "messages" else values)


def _sqlite_value(value: Any) -> Any:
    if isinstance(value, datetime):  # as SQLAlchemy stores it on SQLite: naive UTC, microseconds
        return value.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
    return value


SEARCH_INDEXES = ("ix_messages_text_tsv", "ix_messages_cjk_tsv", "ix_messages_text_trgm")


def load_postgres(dsn: str, schema: str, corpus: Corpus, cjk: Any, progress: Any) -> None:
    """Bulk-load ``corpus`` into the migrated PostgreSQL ``schema`` (COPY, indexes rebuilt after)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{schema}", public')
        conn.execute("SET maintenance_work_mem = '1GB'")
        definitions = [
            r[0]
            for r in conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND indexname = ANY(%s)",
                (schema, list(SEARCH_INDEXES)),
            )
        ]
        for name in SEARCH_INDEXES:
            conn.execute(f'DROP INDEX IF EXISTS "{schema}".{name}')
        with conn.transaction():
            write_corpus(lambda *args: _copy(conn, *args), corpus, cjk, progress, _postgres_stamp)
        started = time.perf_counter()
        for definition in definitions:
            conn.execute(definition)
        conn.execute("VACUUM ANALYZE messages")
        progress(0, f"indexes rebuilt in {time.perf_counter() - started:.0f} s")


def _postgres_stamp(index: int) -> datetime:
    return START + timedelta(seconds=index)


def _copy(conn: Any, table: str, columns: tuple[str, ...], values: list[tuple[Any, ...]]) -> None:
    if not values:
        return
    with conn.cursor().copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for v in values:
            copy.write_row(v)
