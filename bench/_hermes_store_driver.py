"""Bulk-loads the search corpus into Hermes Agent's session database; executed by ``storage.py``
with Hermes' OWN interpreter (its top-level packages are also called ``agent`` and ``gateway``).
Imports nothing of this repository but the corpus generator (``_search_corpus``, standard
library only), so both stores hold exactly the same messages.

stdin: {"path", "size"}
stdout: {"version", "seconds", "cpu", "bytes", "phases": {step: CPU seconds}, "tables": {name: bytes}}

Hermes' ``SessionDB`` creates its schema (tables, indexes, both FTS5 tables and their triggers).
The load is then what a bulk load into it would be, the same as ours: one transaction, the FTS
triggers dropped, ``executemany`` into ``messages``, each FTS table filled in one statement from
the rows, the triggers put back, ``ANALYZE``. Hermes' FTS tables keep their own copy of the text
(they are not external-content tables), which is part of what is measured.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from importlib import metadata
from pathlib import Path

import _search_corpus as corpus_mod

# What Hermes' triggers index for a message (hermes_state.FTS_SQL): content, tool name, tool calls.
FTS_TEXT = "COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, '')"


def main() -> None:
    job = json.load(sys.stdin)
    import hermes_state  # Hermes' module, from its own venv

    path = Path(job["path"])
    hermes_state.SessionDB(db_path=path).close()
    corpus = corpus_mod.Corpus(job["size"])
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    started, cpu = time.perf_counter(), time.process_time()
    phases: dict[str, float] = {}
    spent = corpus_mod.Phases(phases)
    triggers = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'messages'"
    ).fetchall()
    conn.execute("BEGIN")
    for name, _ in triggers:
        conn.execute(f"DROP TRIGGER {name}")
    start = corpus_mod.START.timestamp()
    conn.executemany(
        "INSERT INTO sessions (id, source, started_at) VALUES (?, 'bench', ?)",
        [(sid, start) for sid in corpus_mod.sessions()],
    )
    batch: list[tuple[object, ...]] = []
    for index, row in enumerate(corpus_mod.rows(corpus)):
        role = "user" if index % 2 == 0 else "assistant"
        batch.append(
            (row.session_id, role, row.text, start + index, int(not row.archived), int(row.archived))
        )
        if len(batch) == 20_000:
            _insert(conn, batch)
            batch = []
    _insert(conn, batch)
    spent.done("rows (made and inserted)")
    for table in ("messages_fts", "messages_fts_trigram"):
        conn.execute(f"INSERT INTO {table}(rowid, content) SELECT id, {FTS_TEXT} FROM messages")
        spent.done(table)
    for _, sql in triggers:
        conn.execute(sql)
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    spent.done("commit, ANALYZE, close")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    tables = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
    conn.close()
    out = {
        "version": metadata.version("hermes-agent"),
        "seconds": seconds,
        "cpu": cpu,
        "bytes": path.stat().st_size,
        "phases": phases,
    }
    json.dump({**out, "tables": tables}, sys.stdout)


def _insert(conn: sqlite3.Connection, batch: list[tuple[object, ...]]) -> None:
    conn.executemany(
        "INSERT INTO messages (session_id, role, content, timestamp, active, compacted)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        batch,
    )


if __name__ == "__main__":
    main()
