"""Search index: a bounded prefix of every message, words in any script, substrings.

- The index covers the first INDEX_CHARS characters of ``messages.text``; the text itself
  is stored whole. (PostgreSQL refuses a tsvector over 1 MB: before this revision a
  message of about a megabyte could not be stored at all.)
- ``messages.search_cjk``: the CJK characters of that prefix one by one, so a Chinese or
  Japanese word is found inside a sentence (filled here for existing rows).
- A trigram index for substrings of three characters or more.

SQLite: the FTS5 tables ``messages_fts`` (unicode61; columns ``text``, ``cjk``) and
``messages_fts_trgm`` (trigram) read their content through the view
``messages_fts_source``, which cuts the text; the triggers index the same values.
PostgreSQL: ``text_tsv`` is rebuilt over ``left(text, INDEX_CHARS)`` (a table rewrite), the
generated ``cjk_tsv`` column (``to_tsvector('simple', search_cjk)``, NULL for most rows: a
phrase's recheck reads it instead of parsing the text again) with its GIN index, and a
``pg_trgm`` GIN index over ``left(text, INDEX_CHARS)``. ``pg_trgm`` is created in schema
``public`` when missing (a trusted extension: the database owner may create it); where it
cannot be, the upgrade goes on without that index and substring search scans instead
(slow on a big database; ``hygieia doctor`` says so).

Revision ID: 0003_search_index
Revises: 0002_message_edits
Create Date: 2026-11-30
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import DBAPIError

from gateway.store.search_index import cjk_index_text

revision: str = "0003_search_index"
down_revision: str | Sequence[str] | None = "0002_message_edits"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_log = logging.getLogger("alembic.runtime.migration")

INDEX_CHARS = 65_536
"""Characters of a message the index covers (``gateway.store.search_index.INDEX_CHARS``)."""
BACKFILL_BATCH = 2_000

# ---- SQLite --------------------------------------------------------------------------------

SOURCE_COLUMNS = {
    "text": (f"substr({{row}}.text, 1, {INDEX_CHARS})", "text"),
    "cjk": ("{row}.search_cjk", "search_cjk"),
}
"""Columns of the view the FTS tables read: expression (``{row}`` is ``messages``, ``new`` or
``old``) and the ``messages`` column it comes from."""

FTS_TABLES = {
    "messages_fts": (("text", "cjk"), "tokenize='unicode61 remove_diacritics 2', prefix='2 3 4'"),
    "messages_fts_trgm": (("text",), "tokenize='trigram'"),
}
"""Each FTS5 table: the columns of the source view it indexes, and its options. The prefix
indexes make ``ab*`` one doclist read instead of a merge of every word that starts so."""

SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS messages_fts_ai",
    "DROP TRIGGER IF EXISTS messages_fts_ad",
    "DROP TRIGGER IF EXISTS messages_fts_au",
    *(f"DROP TABLE IF EXISTS {name}" for name in FTS_TABLES),
    "DROP VIEW IF EXISTS messages_fts_source",
]


def _values(columns: tuple[str, ...], row: str) -> str:
    return ", ".join(SOURCE_COLUMNS[c][0].format(row=row) for c in columns)


def _sqlite_create() -> list[str]:
    source = ", ".join(
        f"{expr.format(row='messages')} AS {name}" for name, (expr, _) in SOURCE_COLUMNS.items()
    )
    statements = [f"CREATE VIEW messages_fts_source AS SELECT id, {source} FROM messages"]
    insert, delete = [], []
    for name, (columns, options) in FTS_TABLES.items():
        names = ", ".join(columns)
        statements.append(
            f"CREATE VIRTUAL TABLE {name} USING fts5({names}, content='messages_fts_source', "
            f"content_rowid='id', {options})"
        )
        insert.append(f"INSERT INTO {name}(rowid, {names}) VALUES (new.id, {_values(columns, 'new')});")
        old = _values(columns, "old")
        delete.append(f"INSERT INTO {name}({name}, rowid, {names}) VALUES ('delete', old.id, {old});")
    watched = ", ".join(column for _, column in SOURCE_COLUMNS.values())
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

# ---- both ----------------------------------------------------------------------------------

# Any character cjk_index_text() keeps (a superset is fine: it only picks the rows to look at).
_CJK_CHARS = "\u1100-\u11ff\u3005\u3007\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
_CJK_CHARS += "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"


def _backfill_cjk(dialect: str) -> None:
    """Fill ``search_cjk`` for the rows that hold CJK characters (the others stay NULL)."""
    bind = op.get_bind()
    holds_cjk = (
        sa.text(f"text GLOB '*[{_CJK_CHARS}]*'")
        if dialect == "sqlite"
        else sa.text(f"text ~ '[{_CJK_CHARS}]'")
    )
    messages = sa.table("messages", sa.column("id", sa.Integer), sa.column("text", sa.Text))
    messages_cjk = sa.table("messages", sa.column("id", sa.Integer), sa.column("search_cjk", sa.Text))
    last = 0
    while True:
        rows = bind.execute(
            sa.select(messages.c.id, messages.c.text)
            .where(messages.c.id > last, holds_cjk)
            .order_by(messages.c.id)
            .limit(BACKFILL_BATCH)
        ).all()
        if not rows:
            return
        bind.execute(
            sa.update(messages_cjk)
            .where(messages_cjk.c.id == sa.bindparam("row_id"))
            .values(search_cjk=sa.bindparam("cjk")),
            [{"row_id": r.id, "cjk": cjk_index_text(r.text)} for r in rows],
        )
        last = rows[-1].id


# ---- PostgreSQL ----------------------------------------------------------------------------


def _postgres_tsv(expression: str) -> None:
    op.drop_index("ix_messages_text_tsv", table_name="messages")
    op.drop_column("messages", "text_tsv")
    op.add_column(
        "messages",
        sa.Column("text_tsv", postgresql.TSVECTOR(), sa.Computed(expression, persisted=True), nullable=True),
    )
    op.create_index("ix_messages_text_tsv", "messages", ["text_tsv"], postgresql_using="gin")


def _pg_trgm_schema() -> str | None:
    """The schema holding ``pg_trgm``, created in ``public`` if missing; ``None`` if it cannot be."""
    bind = op.get_bind()
    # Two databases migrating at once (parallel test schemas) must not both create it.
    bind.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext('hygieia:create pg_trgm'))"))
    find = sa.text(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
        " WHERE e.extname = 'pg_trgm'"
    )
    schema = bind.scalar(find)
    if schema is not None:
        return str(schema)
    savepoint = bind.begin_nested()
    try:
        bind.execute(sa.text("CREATE EXTENSION pg_trgm SCHEMA public"))
    except DBAPIError as exc:
        savepoint.rollback()
        _log.warning("pg_trgm cannot be created (%s): substring search will scan the table", exc.orig)
        return None
    savepoint.commit()
    return "public"


def _postgres_create() -> None:
    _postgres_tsv(f"to_tsvector('simple', left(text, {INDEX_CHARS}))")
    op.add_column(
        "messages",
        sa.Column(
            "cjk_tsv",
            postgresql.TSVECTOR(),
            sa.Computed("to_tsvector('simple', search_cjk)", persisted=True),
            nullable=True,
        ),
    )
    op.execute("CREATE INDEX ix_messages_cjk_tsv ON messages USING gin (cjk_tsv) WHERE cjk_tsv IS NOT NULL")
    schema = _pg_trgm_schema()
    if schema is not None:
        opclass = f'"{schema}".gin_trgm_ops'
        op.execute(
            f"CREATE INDEX ix_messages_text_trgm ON messages USING gin (left(text, {INDEX_CHARS}) {opclass})"
        )


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.add_column("messages", sa.Column("search_cjk", sa.Text(), nullable=True))
    _backfill_cjk(dialect)
    if dialect == "sqlite":
        for statement in [*SQLITE_DROP, *_sqlite_create()]:
            op.execute(statement)
    elif dialect == "postgresql":
        _postgres_create()


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in SQLITE_DROP:  # the view reads search_cjk: it goes first
            op.execute(statement)
    elif dialect == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_messages_text_trgm")  # pg_trgm stays: others may use it
        op.drop_index("ix_messages_cjk_tsv", table_name="messages")
        op.drop_column("messages", "cjk_tsv")
        _postgres_tsv("to_tsvector('simple', text)")
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("search_cjk")
    if dialect == "sqlite":
        for statement in SQLITE_0001:
            op.execute(statement)
