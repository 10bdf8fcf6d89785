"""Search index: a bounded prefix of every message.

The index covers the first INDEX_CHARS characters of ``messages.text``; the text itself is
stored whole. PostgreSQL refuses a tsvector over 1 MB, so before this revision a message
of about a megabyte could not be stored at all.

SQLite: the FTS5 table reads its content through the view ``messages_fts_source``, which
cuts the text, and the triggers index the same cut text. PostgreSQL: the generated
``text_tsv`` column is rebuilt over ``left(text, INDEX_CHARS)`` (a table rewrite).

Revision ID: 0003_search_index
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003_search_index"
down_revision: str | Sequence[str] | None = "0002_message_edits"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX_CHARS = 65_536
"""Characters of a message the index covers (``gateway.store.search_index.INDEX_CHARS``)."""

SOURCE_COLUMNS = {"text": f"substr({{row}}.text, 1, {INDEX_CHARS})"}
"""What the index reads of a row (``{row}`` is ``messages``, ``new`` or ``old``)."""

FTS_TABLES = {"messages_fts": (("text",), "unicode61 remove_diacritics 2")}
"""Each FTS5 table: the columns of the source view it indexes, and its tokenizer."""

SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS messages_fts_ai",
    "DROP TRIGGER IF EXISTS messages_fts_ad",
    "DROP TRIGGER IF EXISTS messages_fts_au",
    *(f"DROP TABLE IF EXISTS {name}" for name in FTS_TABLES),
    "DROP VIEW IF EXISTS messages_fts_source",
]


def _values(columns: tuple[str, ...], row: str) -> str:
    return ", ".join(SOURCE_COLUMNS[c].format(row=row) for c in columns)


def _sqlite_create() -> list[str]:
    source = ", ".join(f"{expr.format(row='messages')} AS {name}" for name, expr in SOURCE_COLUMNS.items())
    statements = [f"CREATE VIEW messages_fts_source AS SELECT id, {source} FROM messages"]
    insert, delete = [], []
    for name, (columns, tokenizer) in FTS_TABLES.items():
        names = ", ".join(columns)
        statements.append(
            f"CREATE VIRTUAL TABLE {name} USING fts5({names}, content='messages_fts_source', "
            f"content_rowid='id', tokenize='{tokenizer}')"
        )
        insert.append(f"INSERT INTO {name}(rowid, {names}) VALUES (new.id, {_values(columns, 'new')});")
        old = _values(columns, "old")
        delete.append(f"INSERT INTO {name}({name}, rowid, {names}) VALUES ('delete', old.id, {old});")
    watched = ", ".join(SOURCE_COLUMNS)
    statements += [
        f"CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN {' '.join(insert)} END",
        f"CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN {' '.join(delete)} END",
        # Archiving flips active/compacted only: it never touches the index.
        f"CREATE TRIGGER messages_fts_au AFTER UPDATE OF {watched} ON messages BEGIN "
        f"{' '.join(delete + insert)} END",
    ]
    statements += [f"INSERT INTO {name}({name}) VALUES ('rebuild')" for name in FTS_TABLES]
    return statements


# The index as revision 0001 built it (for the downgrade).
SQLITE_0001 = [
    """CREATE VIRTUAL TABLE messages_fts USING fts5(
        text, content='messages', content_rowid='id', tokenize='unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts(rowid, text) VALUES (new.id, new.text);
    END""",
    """CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
    END""",
    """CREATE TRIGGER messages_fts_au AFTER UPDATE OF text ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
        INSERT INTO messages_fts(rowid, text) VALUES (new.id, new.text);
    END""",
    "INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')",
]


def _postgres_tsv(expression: str) -> None:
    op.drop_index("ix_messages_text_tsv", table_name="messages")
    op.drop_column("messages", "text_tsv")
    op.add_column(
        "messages",
        sa.Column("text_tsv", postgresql.TSVECTOR(), sa.Computed(expression, persisted=True), nullable=True),
    )
    op.create_index("ix_messages_text_tsv", "messages", ["text_tsv"], postgresql_using="gin")


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in [*SQLITE_DROP, *_sqlite_create()]:
            op.execute(statement)
    elif dialect == "postgresql":
        _postgres_tsv(f"to_tsvector('simple', left(text, {INDEX_CHARS}))")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in [*SQLITE_DROP, *SQLITE_0001]:
            op.execute(statement)
    elif dialect == "postgresql":
        _postgres_tsv("to_tsvector('simple', text)")
